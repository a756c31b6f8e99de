#!/usr/bin/env python3
"""Compliance check for MLPerf Training `:::MLLOG` result logs (Python 3 standard library only).

A re-implementation of the rules the official checker (`python3 -m mlperf_logging.compliance_checker
--usage training --ruleset R`) applies to BERT under ruleset 5.0.0 and to BERT and ResNet-50 under
4.0.0, so kiln can check its logs where PyYAML and mlperf_logging are not installed.

    python3 tools/mllog_check.py --ruleset 5.0.0 --benchmark bert result_bert_1234.log

Prints each violation on its own line and exits 1, or prints "OK" and exits 0.

Official rules, applied the way the official engine applies them: the ruleset's common rules, then
the division's (`submission_division` picks closed/open), then the benchmark's (`submission_benchmark`
picks it); each set runs over the whole log with its own state; a later set that names a key replaces
the earlier set's messages for that key; CHECKs run on every occurrence except for submission_* keys
(first occurrence only); a CHECK that raises counts as failed.

Differences from the official tool, on purpose:
- A key required EXACTLY_ONE that occurs more than once is an error, as with the official --werror
  (without it, identical repeats are only a warning); --allow-identical-repeats restores the warning.
- Unless --no-extra, kiln's stricter rules also apply (marked "[kiln]"): time_ms never decreases;
  every line has metadata file and lineno and an event_type matching its key (*_start ->
  INTERVAL_START, *_stop -> INTERVAL_END); no NaN or infinite values; all five submission_* keys once
  with valid values; exactly one seed, an int; submission_benchmark equals --benchmark; eval_accuracy
  epoch_num never decreases; run_stop status is success or aborted, and success needs an eval_accuracy
  at or above the target (and below 1.0) before it.
"""

import argparse
import json
import math
import re
import sys

TOKEN = ':::MLLOG '

ROUND_BENCHMARKS = {
    '5.0.0': ['retinanet', 'stable_diffusion', 'dlrm_dcnv2', 'bert', 'rgat', 'llama2_70b_lora',
              'llama31_405b'],
    '4.0.0': ['resnet', 'ssd', 'stable_diffusion', 'maskrcnn', 'gpt3', 'dlrm_dcnv2', 'bert', 'rnnt',
              'unet3d', 'gnn', 'llama2_70b_lora'],
}
OPEN_ROUND_BENCHMARKS = {
    '5.0.0': ROUND_BENCHMARKS['5.0.0'],
    '4.0.0': [b for b in ROUND_BENCHMARKS['4.0.0'] if b != 'llama2_70b_lora'],
}
SUPPORTED = {'5.0.0': ['bert'], '4.0.0': ['bert', 'resnet']}
TARGETS = {'bert': 0.720, 'resnet': 0.7590}
SUBMISSION_STATUSES = ['cloud', 'onprem', 'preview', 'research']


class Line:
    def __init__(self, lineno, text, record):
        self.lineno = lineno
        self.text = text
        self.time_ms = float(record['time_ms'])
        self.key = record['key']
        self.event_type = record.get('event_type')
        self.value = record['value']
        self.metadata = record['metadata']
        if not isinstance(self.metadata, dict):
            raise ValueError('metadata is not an object')
        self.v = {'value': self.value, 'metadata': self.metadata}


def parse(path):
    """Returns (lines, errors) the way the official parser reads a file (latin-1, prefix stripped)."""
    lines, errors = [], []
    with open(path, encoding='latin-1') as f:
        for lineno, raw in enumerate(f, 1):
            if TOKEN not in raw:
                continue
            text = re.sub('.*' + TOKEN, TOKEN, raw).strip()
            try:
                lines.append(Line(lineno, text, json.loads(text[len(TOKEN):])))
            except (ValueError, KeyError, TypeError) as e:
                errors.append(f'line {lineno}: cannot parse log line ({type(e).__name__}: {e})')
    return lines, errors


class Rule:
    """One KEY record: REQ, CHECKs (all must hold), POST, ATLEAST_ONE_CHECK."""

    def __init__(self, req=None, checks=(), post=None, atleast_one=None, alternatives=()):
        self.req = req
        self.checks = list(checks)
        self.post = post
        self.atleast_one = atleast_one
        self.alternatives = list(alternatives)


def md(v):
    return v['metadata']


def common_rules(ruleset):
    """training_<ruleset>/common.yaml."""
    progress = 'samples_count' if ruleset == '5.0.0' else 'step_num'

    def division_post(v, s, ll, enqueue):
        enqueue(('division', v['value']))
        s['compile_time_mins'] = 240 if v['value'] == 'open' else 30

    def init_start_post(v, s, ll, enqueue):
        s['init_started'] = True
        s['first_init_start'] = min(s['first_init_start'], ll.time_ms)

    def init_stop_post(v, s, ll, enqueue):
        s['init_stopped'] = True

    def run_start_post(v, s, ll, enqueue):
        s['run_started'] = True

    has_progress = ('epoch_num or {} in metadata'.format(progress),
                    lambda v, s, ll: 'epoch_num' in md(v) or progress in md(v))
    rules = {
        'submission_division': Rule('EXACTLY_ONE', [
            ("value in ['closed', 'open']", lambda v, s, ll: v['value'] in ['closed', 'open'])],
            post=division_post),
        'cache_clear': Rule('AT_LEAST_ONE', [("'value' in v", lambda v, s, ll: 'value' in v)]),
        'init_start': Rule('AT_LEAST_ONE', [
            ('not after init_stop', lambda v, s, ll: not s['init_stopped']),
            ('not after run_start', lambda v, s, ll: not s['run_started'])], post=init_start_post),
        'init_stop': Rule('EXACTLY_ONE', [
            ('after init_start', lambda v, s, ll: s['init_started']),
            ('before run_start', lambda v, s, ll: not s['run_started']),
            ('within the init time limit of the first init_start (30 min closed, 240 min open; '
             'submission_division must come before init_stop)',
             lambda v, s, ll: ll.time_ms - s['first_init_start'] < s['compile_time_mins'] * 60 * 1e3)],
            post=init_stop_post),
        'run_start': Rule('EXACTLY_ONE', [('after init_stop', lambda v, s, ll: s['init_stopped'] is True)],
                          post=run_start_post),
        'run_stop': Rule('EXACTLY_ONE', [
            ('after run_start', lambda v, s, ll: s['run_started']),
            ("'status' in metadata", lambda v, s, ll: 'status' in md(v))]),
        'block_start': Rule('AT_LEAST_ONE_OR', [
            ('after run_start', lambda v, s, ll: s['run_started']),
            (f'epoch_count or {progress} in metadata',
             lambda v, s, ll: 'epoch_count' in md(v) or progress in md(v)),
            ('first_epoch_num in metadata with epoch_count',
             lambda v, s, ll: 'first_epoch_num' in md(v) if 'epoch_count' in md(v) else True),
            ('epoch_count > 0', lambda v, s, ll: md(v)['epoch_count'] > 0 if 'epoch_count' in md(v) else True),
            (f'{progress} >= 0', lambda v, s, ll: md(v)[progress] >= 0 if progress in md(v) else True)],
            alternatives=['epoch_start']),
        'block_stop': Rule('AT_LEAST_ONE_OR', [
            (f'first_epoch_num or {progress} in metadata',
             lambda v, s, ll: 'first_epoch_num' in md(v) or progress in md(v))],
            alternatives=['epoch_stop']),
        'epoch_start': Rule('AT_LEAST_ONE_OR', [("'epoch_num' in metadata", lambda v, s, ll: 'epoch_num' in md(v))],
                            alternatives=['block_start']),
        'epoch_stop': Rule('AT_LEAST_ONE_OR', [("'epoch_num' in metadata", lambda v, s, ll: 'epoch_num' in md(v))],
                           alternatives=['block_stop']),
        'eval_start': Rule('AT_LEAST_ONE_OR', [has_progress], alternatives=['block_start']),
        'eval_stop': Rule('AT_LEAST_ONE_OR', [has_progress], alternatives=['block_stop']),
        'eval_accuracy': Rule('AT_LEAST_ONE', [has_progress]),
        'train_samples': Rule('EXACTLY_ONE', [("value != ''", lambda v, s, ll: v['value'] != '')]),
        'eval_samples': Rule('EXACTLY_ONE', [("value != ''", lambda v, s, ll: v['value'] != '')]),
    }
    if ruleset == '4.0.0':
        rules['submission_org'] = Rule('EXACTLY_ONE', [("value != ''", lambda v, s, ll: v['value'] != '')])
        rules['submission_platform'] = Rule('EXACTLY_ONE', [("value != ''", lambda v, s, ll: v['value'] != '')])
        rules['submission_status'] = Rule('EXACTLY_ONE', [
            (f'value in {SUBMISSION_STATUSES}', lambda v, s, ll: v['value'] in SUBMISSION_STATUSES)])
    return rules


def division_rules(ruleset, division):
    """{closed,open}_common.yaml."""
    allowed = (ROUND_BENCHMARKS if division == 'closed' else OPEN_ROUND_BENCHMARKS)[ruleset]

    def benchmark_post(v, s, ll, enqueue):
        enqueue((division, v['value']))

    rules = {'submission_benchmark': Rule('EXACTLY_ONE', [
        (f'value in {allowed}', lambda v, s, ll: v['value'] in allowed)], post=benchmark_post)}
    if division == 'closed':
        rules['gradient_accumulation_steps'] = Rule('EXACTLY_ONE', [
            ('value > 0', lambda v, s, ll: v['value'] > 0)])
    return rules


def exactly_one(*keys):
    return {k: Rule('EXACTLY_ONE') for k in keys}


def equals(x):
    return (f'value == {x}', lambda v, s, ll: v['value'] == x)


def benchmark_rules(division, benchmark):
    """{closed,open}_<benchmark>.yaml, and the ResNet optimizer files opt_name enqueues."""
    epoch_num = ("'epoch_num' in metadata", lambda v, s, ll: 'epoch_num' in md(v))
    if (division, benchmark) == ('closed', 'bert'):
        rules = exactly_one('global_batch_size', 'opt_base_learning_rate', 'opt_lamb_epsilon',
                            'opt_learning_rate_training_steps', 'opt_learning_rate_warmup_steps',
                            'num_warmup_steps', 'start_warmup_step', 'opt_lamb_beta_1', 'opt_lamb_beta_2',
                            'opt_lamb_weight_decay_rate')
        rules['eval_accuracy'] = Rule('AT_LEAST_ONE', [epoch_num], atleast_one=(
            '0.720 <= value < 1.0', lambda v, s, ll: v['value'] >= 0.720 and v['value'] < 1.0))
        return rules
    if (division, benchmark) == ('open', 'bert'):
        return {'eval_accuracy': Rule('AT_LEAST_ONE', [epoch_num], atleast_one=(
            'value < 1.0', lambda v, s, ll: v['value'] < 1.0))}
    if (division, benchmark) == ('closed', 'resnet'):
        def opt_post(v, s, ll, enqueue):
            enqueue(('resnet_opt', v['value']))

        return {
            'global_batch_size': Rule('EXACTLY_ONE', [('value > 0', lambda v, s, ll: v['value'] > 0)]),
            'opt_name': Rule('EXACTLY_ONE', [("value in ['sgd', 'lars']", lambda v, s, ll: v['value'] in ['sgd', 'lars'])],
                             post=opt_post),
            'eval_accuracy': Rule('AT_LEAST_ONE', [epoch_num], atleast_one=(
                '0.7590 <= value < 1.0', lambda v, s, ll: v['value'] >= 0.7590 and v['value'] < 1.0)),
        }
    if (division, benchmark) == ('open', 'resnet'):
        return {'eval_accuracy': Rule('AT_LEAST_ONE', [epoch_num], atleast_one=(
            'value < 1.0', lambda v, s, ll: v['value'] < 1.0))}
    if (division, benchmark) == ('resnet_opt', 'lars'):
        rules = exactly_one('lars_opt_base_learning_rate', 'lars_opt_learning_rate_decay_steps',
                            'lars_opt_learning_rate_warmup_epochs', 'lars_opt_momentum')
        rules['lars_opt_end_learning_rate'] = Rule('EXACTLY_ONE', [equals(0.0001)])
        rules['lars_opt_learning_rate_decay_poly_power'] = Rule('EXACTLY_ONE', [equals(2)])
        rules['lars_epsilon'] = Rule('EXACTLY_ONE', [equals(0.0)])
        rules['lars_opt_weight_decay'] = Rule('EXACTLY_ONE', [(
            'log2(value/1e-4) is an integer', lambda v, s, ll: is_integer(math.log2(v['value'] / 1e-4)))])
        return rules
    if (division, benchmark) == ('resnet_opt', 'sgd'):
        rules = exactly_one('sgd_opt_learning_rate_decay_poly_power', 'sgd_opt_learning_rate_decay_steps',
                            'sgd_opt_momentum', 'model_bn_span', 'opt_learning_rate_warmup_epochs')
        rules['sgd_opt_base_learning_rate'] = Rule('EXACTLY_ONE', [(
            'value/0.001 is an integer', lambda v, s, ll: is_integer(v['value'] / 0.001))])
        rules['sgd_opt_end_learning_rate'] = Rule('EXACTLY_ONE', [equals(0.0001)])
        rules['sgd_opt_weight_decay'] = Rule('EXACTLY_ONE', [(
            'log2(value/1e-4) is an integer', lambda v, s, ll: is_integer(math.log2(v['value'] / 1e-4)))])
        return rules
    return None


def is_integer(x):
    return abs(x - round(x)) < 1e-5


class Checker:
    def __init__(self, ruleset, benchmark, allow_identical_repeats):
        self.ruleset = ruleset
        self.benchmark = benchmark
        self.allow_identical_repeats = allow_identical_repeats
        self.keyed = {}  # key -> messages; a later rule set naming the key replaces them
        self.other = []
        self.warnings = []

    def error(self, msg, key=None):
        if key is None:
            self.other.append(msg)
        else:
            self.keyed.setdefault(key, []).append(msg)

    def messages(self):
        return [m for msgs in self.keyed.values() for m in msgs] + self.other

    def run_official(self, lines):
        if not lines:
            self.error('no :::MLLOG lines found')
        queue = [('common', None)]
        while queue:
            which = queue.pop(0)
            if which[0] == 'common':
                rules = common_rules(self.ruleset)
            elif which[0] == 'division':
                if which[1] not in ('closed', 'open'):
                    continue  # submission_division's own CHECK already failed
                rules = division_rules(self.ruleset, which[1])
            else:
                rules = benchmark_rules(which[0], which[1])
                if rules is None:
                    self.error(f'no rules for {which[0]} {which[1]} under ruleset {self.ruleset}')
                    continue
            self.apply(rules, lines, queue.append)

    def apply(self, rules, lines, enqueue):
        for key in rules:
            self.keyed.pop(key, None)
        s = {'init_started': False, 'init_stopped': False, 'run_started': False,
             'first_init_start': 9e99, 'compile_time_mins': 0}
        occurrences = {k: [] for k in rules}
        satisfied = set()
        for ll in lines:
            rule = rules.get(ll.key)
            if rule is None:
                continue
            occurrences[ll.key].append(ll)
            if ll.key.startswith('submission_') and len(occurrences[ll.key]) > 1:
                continue
            for desc, check in rule.checks:
                try:
                    ok = check(ll.v, s, ll)
                except Exception as e:
                    self.error(f'line {ll.lineno}: {ll.key}: CHECK "{desc}" raised {type(e).__name__}: {e}', ll.key)
                    break
                if not ok:
                    self.error(f'line {ll.lineno}: {ll.key}: CHECK failed: {desc}', ll.key)
                    break
            if rule.atleast_one is not None:
                try:
                    if rule.atleast_one[1](ll.v, s, ll):
                        satisfied.add(ll.key)
                except Exception:
                    pass
            if rule.post is not None:
                try:
                    rule.post(ll.v, s, ll, enqueue)
                except Exception as e:
                    self.error(f'line {ll.lineno}: {ll.key}: POST raised {type(e).__name__}: {e}', ll.key)

        for key, rule in rules.items():
            found = occurrences[key]
            if rule.req == 'EXACTLY_ONE':
                if not found:
                    self.error(f'missing: exactly one {key} is required, found none', key)
                elif len(found) > 1:
                    values = {json.dumps(ll.value, sort_keys=True) for ll in found}
                    where = ', '.join(str(ll.lineno) for ll in found)
                    if self.allow_identical_repeats and len(values) == 1:
                        self.warnings.append(f'warning: {key} logged {len(found)} times (lines {where})')
                    else:
                        self.error(f'exactly one {key} is required, found {len(found)} (lines {where})', key)
            elif rule.req == 'AT_LEAST_ONE' and not found:
                self.error(f'missing: at least one {key} is required, found none', key)
            if rule.atleast_one is not None and found and key not in satisfied:
                self.error(f'{key}: no occurrence satisfies {rule.atleast_one[0]}', key)
        seen = set()
        for key, rule in rules.items():
            if rule.req != 'AT_LEAST_ONE_OR':
                continue
            alts = tuple(sorted({key, *rule.alternatives}))
            if alts in seen:
                continue
            seen.add(alts)
            if not any(occurrences.get(k) for k in alts):
                self.error('missing: at least one of {} is required'.format(' or '.join(alts)))

    def run_extra(self, lines):
        target = TARGETS.get(self.benchmark)
        last_time = None
        last_eval_epoch = None
        best_accuracy = None
        counts = {}
        for ll in lines:
            where = f'line {ll.lineno}: {ll.key}'
            counts.setdefault(ll.key, []).append(ll)
            if last_time is not None and ll.time_ms < last_time:
                self.error(f'{where}: [kiln] time_ms {ll.time_ms:.0f} is earlier than the line before ({last_time:.0f})')
            last_time = ll.time_ms
            if 'file' not in ll.metadata or 'lineno' not in ll.metadata:
                self.error(f'{where}: [kiln] metadata lacks file or lineno')
            expected = ('INTERVAL_START' if ll.key.endswith('_start') else
                        'INTERVAL_END' if ll.key.endswith('_stop') else 'POINT_IN_TIME')
            if ll.event_type != expected:
                self.error(f'{where}: [kiln] event_type {ll.event_type!r}, expected {expected!r}')
            if not finite(ll.value) or not all(finite(x) for x in ll.metadata.values()):
                self.error(f'{where}: [kiln] NaN or infinite number')
            if ll.key == 'eval_accuracy':
                epoch = ll.metadata.get('epoch_num')
                if is_number(epoch):
                    if last_eval_epoch is not None and epoch < last_eval_epoch:
                        self.error(f'{where}: [kiln] epoch_num {epoch} is below the previous eval\'s {last_eval_epoch}')
                    last_eval_epoch = epoch
                if is_number(ll.value) and ll.value < 1.0:
                    best_accuracy = ll.value if best_accuracy is None else max(best_accuracy, ll.value)
            if ll.key == 'run_stop':
                status = ll.metadata.get('status')
                if status not in ('success', 'aborted'):
                    self.error(f'{where}: [kiln] status {status!r} is not success or aborted')
                if status == 'success' and target is not None and (best_accuracy is None or best_accuracy < target):
                    self.error(f'{where}: [kiln] status success but no eval_accuracy >= {target} before it'
                               f' (best {best_accuracy})')

        for key in ('submission_benchmark', 'submission_org', 'submission_division', 'submission_status',
                    'submission_platform', 'seed'):
            found = counts.get(key, [])
            if len(found) != 1:
                self.error(f'[kiln] exactly one {key} is required, found {len(found)}')
        value = {k: v[0].value for k, v in counts.items()}
        if 'submission_org' in value and not nonempty_string(value['submission_org']):
            self.error('[kiln] submission_org must be a non-empty string')
        if 'submission_platform' in value and not nonempty_string(value['submission_platform']):
            self.error('[kiln] submission_platform must be a non-empty string')
        if 'submission_status' in value and value['submission_status'] not in SUBMISSION_STATUSES:
            self.error(f"[kiln] submission_status {value['submission_status']!r} is not one of {SUBMISSION_STATUSES}")
        if 'submission_benchmark' in value and value['submission_benchmark'] != self.benchmark:
            self.error(f"[kiln] submission_benchmark {value['submission_benchmark']!r} is not {self.benchmark!r}")
        if 'seed' in value and (not isinstance(value['seed'], int) or isinstance(value['seed'], bool)):
            self.error(f"[kiln] seed {value['seed']!r} is not an int")


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def finite(x):
    return not isinstance(x, float) or math.isfinite(x)


def nonempty_string(x):
    return isinstance(x, str) and x != ''


def main(argv):
    parser = argparse.ArgumentParser(description='Check an MLPerf Training :::MLLOG result log.')
    parser.add_argument('log', help='the result log, e.g. result_bert_1234.log')
    parser.add_argument('--ruleset', required=True, choices=sorted(SUPPORTED))
    parser.add_argument('--benchmark', required=True, choices=['bert', 'resnet'])
    parser.add_argument('--allow-identical-repeats', action='store_true',
                        help='an EXACTLY_ONE key repeated with the same value is a warning (official default)')
    parser.add_argument('--no-extra', action='store_true', help="apply only the official checker's rules")
    args = parser.parse_args(argv)
    if args.benchmark not in SUPPORTED[args.ruleset]:
        parser.error(f'ruleset {args.ruleset} has no {args.benchmark} benchmark '
                     f'(use 5.0.0 for bert, 4.0.0 for resnet)')

    try:
        lines, parse_errors = parse(args.log)
    except OSError as e:
        print(f'{args.log}: cannot read: {e.strerror}')
        return 1
    checker = Checker(args.ruleset, args.benchmark, args.allow_identical_repeats)
    for e in parse_errors:
        checker.error(e)
    checker.run_official(lines)
    if not args.no_extra:
        checker.run_extra(lines)
    for w in checker.warnings:
        print(w)
    messages = checker.messages()
    for m in messages:
        print(m)
    if messages:
        return 1
    print('OK')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
