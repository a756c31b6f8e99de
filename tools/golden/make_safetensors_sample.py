"""Writes tests/golden/python_sample.safetensors: one small tensor of every dtype kiln reads,
with values tests/io/safetensors_test.cc checks. Run: /usr/bin/python3 tools/golden/make_safetensors_sample.py"""
import os

import numpy as np

import safetensors_np as st

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden",
                   "python_sample.safetensors")

tensors = {
    "f32": (np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1.0),
    "bf16": st.Bf16(st.f32_to_bf16_bits(np.array([1.0, -2.5, 3.140625], dtype=np.float32))),
    "f16": np.array([0.5, -1.25, 65504.0], dtype=np.float16),
    "i32": np.array([-7, 0, 2147483647], dtype=np.int32),
    "i64": np.array([[-(2 ** 40)], [5]], dtype=np.int64),
    "u16": np.array([0, 65535], dtype=np.uint16),
    "u8": np.array([1, 2, 3, 255], dtype=np.uint8),
    "scalar": np.array(42.0, dtype=np.float32),
    "empty": np.zeros((0, 4), dtype=np.float32),
}
st.save(OUT, tensors, {"format": "pt", "creator": "tools/golden"})
back, meta = st.load(OUT)
assert meta == {"format": "pt", "creator": "tools/golden"}
assert np.array_equal(back["i64"], tensors["i64"])
print("wrote", os.path.normpath(OUT))
