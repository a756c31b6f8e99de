"""Golden references for kiln's ResNet (models/resnet.h), nn::SoftmaxCrossEntropy and optim::Lars:
reduced torchvision ResNets v1.5 (torchvision's own Bottleneck and BasicBlock, narrow widths,
ImageNet stem) evaluated in float64 on a 32x32 batch.

Writes, for each entry of GOLDENS, tests/golden/<name>.safetensors:
  <param>                 initial parameters, torchvision names and layouts (conv OIHW), F32
  <bn>.running_mean/var   initial BN running statistics (random, to test the update), F32
  images (N, H, W, 3)     the input in kiln's NHWC layout, F32;  labels (N) I32, -1 = padding
  logits (N, classes), loss ([])     forward in train mode; loss = F.cross_entropy(
                          label_smoothing=0.1, ignore_index=-1)
  grad.<param>            d loss / d param
  after.<bn>.running_mean/var, after.<bn>.num_batches_tracked   BN buffers after that forward
  eval_logits (N, classes)  forward in eval mode (the running statistics above), same params
  loss2 ([])              the loss of the second train-mode forward (after one LARS step)
  lars2.<param>           parameters after two LARS steps (lr LR[0], then LR[1], forward and
                          backward recomputed before the second), MLPerf LARS (see lars()).
Everything is computed in float64 from float32-rounded values and stored as F32.
Metadata holds the config.

resnet_tiny: Bottleneck, one block per stage (every shortcut a projection).
resnet_basic_tiny: BasicBlock, two blocks in the first two stages: identity shortcuts (stage 1
  keeps the stem's width and stride 1; the second block of each stage), a projection for a
  channel change with stride 2 (layer2.0) and for a stride change alone (layer3.0, 16 -> 16).

Run: /usr/bin/python3 tools/golden/make_resnet_golden.py   (Debian python3-torch, torchvision)
"""
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models.resnet import BasicBlock, Bottleneck

import safetensors_np as st

torch.set_default_dtype(torch.float64)
GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden")

GOLDENS = {
    "resnet_tiny": dict(block="bottleneck", depths=(1, 1, 1, 1), stem_width=8, widths=(4, 8, 16, 32),
                        classes=10, batch=4, size=32),
    "resnet_basic_tiny": dict(block="basic", depths=(2, 2, 1, 1), stem_width=8, widths=(8, 16, 16, 32),
                              classes=10, batch=4, size=32),
}
BLOCKS = {"basic": BasicBlock, "bottleneck": Bottleneck}
LABELS = [3, 7, -1, 1]
SMOOTHING = 0.1
LARS = dict(momentum=0.9, weight_decay=0.01, eeta=0.001, epsilon=0.0)
LR = (2.0, 1.5)


class TinyResNet(nn.Module):
    """torchvision.models.ResNet with configurable stage widths (torchvision fixes 64..512)."""

    def __init__(self, block, depths, stem_width, widths, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, stem_width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(stem_width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        inplanes = stem_width
        for i, (depth, w) in enumerate(zip(depths, widths)):
            stride, out = 1 if i == 0 else 2, w * block.expansion
            down = None
            if stride != 1 or inplanes != out:  # torchvision's _make_layer rule
                down = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride, bias=False),
                                     nn.BatchNorm2d(out))
            blocks = [block(inplanes, w, stride, down)] + [block(out, w) for _ in range(depth - 1)]
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
            inplanes = out
        self.nstages = len(widths)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for i in range(self.nstages):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def decays(name):
    """kiln's decay flag = not on MLPerf's skip list (bn, bias, downsample.1)."""
    return not ("bn" in name or "bias" in name or "downsample.1" in name)


def lars(model, bufs, lr):
    m, wd, eeta, eps = LARS["momentum"], LARS["weight_decay"], LARS["eeta"], LARS["epsilon"]
    with torch.no_grad():
        for name, p in model.named_parameters():
            g = p.grad
            if decays(name):
                wn, gn = p.norm().item(), g.norm().item()
                r = eeta * wn / (gn + wd * wn + eps) if wn > 0 and gn > 0 else 1.0
                update = lr * r * (g + wd * p)
            else:
                update = lr * g
            bufs[name] = m * bufs.get(name, torch.zeros_like(p)) + update
            p -= bufs[name]


def loss_of(logits, labels):
    loss = F.cross_entropy(logits, labels, label_smoothing=SMOOTHING, ignore_index=-1)
    # The same loss written out: mean over non-padding rows of -Σ q log p, q = 0.9 onehot + 0.01.
    logp = F.log_softmax(logits, dim=1)
    keep = labels >= 0
    q = torch.full_like(logp, SMOOTHING / logp.shape[1])
    q[keep, labels[keep]] += 1.0 - SMOOTHING
    manual = -(q * logp)[keep].sum() / keep.sum()
    assert abs(loss.item() - manual.item()) < 1e-12, (loss.item(), manual.item())
    return loss


def make(golden, c):
    gen = torch.Generator().manual_seed(1234)
    model = TinyResNet(BLOCKS[c["block"]], c["depths"], c["stem_width"], c["widths"], c["classes"])
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "bn" in name or "downsample.1" in name:  # not the torchvision 1/0: test both
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 4:  # kaiming normal, fan_out, like torchvision
                std = (2.0 / (p.shape[0] * p.shape[2] * p.shape[3])) ** 0.5
                p.copy_(std * torch.randn(p.shape, generator=gen))
            else:
                bound = p.shape[-1] ** -0.5 if p.dim() == 2 else model.fc.in_features ** -0.5
                p.copy_(bound * (2 * torch.rand(p.shape, generator=gen) - 1))
            p.copy_(p.float().double())
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_((0.1 * torch.randn(b.shape, generator=gen)).float().double())
            elif name.endswith("running_var"):
                b.copy_((1.0 + 0.2 * torch.rand(b.shape, generator=gen)).float().double())

    out = {}
    for name, p in model.named_parameters():
        out[name] = p.detach().numpy().astype(np.float32)
    for name, b in model.named_buffers():
        if not name.endswith("num_batches_tracked"):
            out[name] = b.numpy().astype(np.float32)

    x = torch.randn(c["batch"], 3, c["size"], c["size"], generator=gen).float().double()
    labels = torch.tensor(LABELS)
    out["images"] = x.permute(0, 2, 3, 1).numpy().astype(np.float32)  # NHWC
    out["labels"] = labels.numpy().astype(np.int32)

    model.train()
    logits = model(x)
    loss = loss_of(logits, labels)
    loss.backward()
    out["logits"] = logits.detach().numpy().astype(np.float32)
    out["loss"] = np.array(loss.item(), dtype=np.float32)
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.numpy().astype(np.float32)
    for name, b in model.named_buffers():
        out["after." + name] = b.numpy().astype(np.float32)
    model.eval()
    with torch.no_grad():
        out["eval_logits"] = model(x).numpy().astype(np.float32)
    model.train()

    bufs = {}
    lars(model, bufs, LR[0])
    model.zero_grad()
    loss2 = loss_of(model(x), labels)
    loss2.backward()
    out["loss2"] = np.array(loss2.item(), dtype=np.float32)
    lars(model, bufs, LR[1])
    for name, p in model.named_parameters():
        out["lars2." + name] = p.detach().numpy().astype(np.float32)

    meta = dict(block=c["block"], depths=",".join(map(str, c["depths"])),
                stem_width=c["stem_width"], widths=",".join(map(str, c["widths"])),
                classes=c["classes"], label_smoothing=SMOOTHING, lr0=LR[0], lr1=LR[1],
                **{"lars_" + k: v for k, v in LARS.items()})
    path = os.path.join(GOLDEN_DIR, golden + ".safetensors")
    st.save(path, out, meta)
    print(f"wrote {path}: {os.path.getsize(path)} bytes, loss {loss.item():.6f} -> {loss2.item():.6f}")


def main():
    for name, config in GOLDENS.items():
        make(name, config)


if __name__ == "__main__":
    main()
