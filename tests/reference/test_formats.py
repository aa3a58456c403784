#!/usr/bin/python3
"""Checks the numpy decoders, rounding and safetensors reader of safetensors_np.py against
values derived by hand from the format definitions. Exit 0 on success."""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def test_fp8():
    t = st.FP8_E4M3_TABLE
    check(t[0x00] == 0 and t[0x80] == 0 and np.signbit(t[0x80]), "zeros")
    check(t[0x01] == 2.0 ** -9 and t[0x07] == 7 * 2.0 ** -9, "subnormals")
    check(t[0x08] == 2.0 ** -6, "smallest normal")
    check(t[0x38] == 1.0 and t[0x39] == 1.125 and t[0xB8] == -1.0, "one")
    check(t[0x7E] == 448.0 and t[0xFE] == -448.0, "max")
    check(np.isnan(t[0x7F]) and np.isnan(t[0xFF]), "nan")
    check(np.count_nonzero(np.isnan(t)) == 2, "only two NaN codes")
    pos = t[:0x7F]
    check(np.all(np.diff(pos) > 0), "codes 0..0x7E ascend")
    # rounding: every code maps to itself; midpoints go to the even code
    check(np.array_equal(st.round_to_fp8_e4m3(pos), pos), "codes are fixed points")
    mids = (pos[:-1] + pos[1:]) / 2
    r = st.round_to_fp8_e4m3(mids)
    lower_even = (np.arange(0x7E) % 2) == 0
    check(np.array_equal(r, np.where(lower_even, pos[:-1], pos[1:])), "ties to even")
    check(st.round_to_fp8_e4m3(np.array([1000.0, -1e9]))[0] == 448, "saturates")
    check(st.round_to_fp8_e4m3(np.array([-3e-3]))[0] == -2.0 ** -9 * 2, "negative subnormal")
    check(st.round_to_fp8_e4m3(np.array([2.0 ** -10]))[0] == 0.0, "half the min subnormal -> 0")
    check(st.round_to_fp8_e4m3(np.array([1.5 * 2.0 ** -9]))[0] == 2.0 ** -8, "tie 1.5 -> 2")
    codes = st.encode_fp8_e4m3(t[:0x7F])
    check(np.array_equal(codes, np.arange(0x7F)), "encode inverts decode")


def test_fp4():
    vals = np.array([0, .5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)
    check(np.array_equal(st.round_to_fp4_e2m1(vals), vals), "fixed points")
    check(np.array_equal(st.round_to_fp4_e2m1(np.array([.25, .75, 1.25, 1.75, 2.5, 3.5, 5, 7])),
                         np.array([0, 1, 1, 2, 2, 4, 4, 6])), "ties to even, saturation")
    check(st.round_to_fp4_e2m1(np.array([-2.6]))[0] == -3, "sign")
    # packing: low nibble = even element; bit 3 = sign
    packed = np.array([[0x21, 0xF9]], dtype=np.uint8).view(np.int8)
    check(np.array_equal(st.decode_fp4_e2m1_packed(packed), [[0.5, 1.0, -0.5, -6.0]]), "nibbles")
    w = np.array([[0.5, -1.0, 6.0, -6.0, 0.0, 3.0]])
    check(np.array_equal(st.decode_fp4_e2m1_packed(st.encode_fp4_e2m1_packed(w)), w), "round trip")


def test_e8m0_bf16():
    check(st.decode_e8m0(np.array([127, 0, 254, 130], dtype=np.uint8)).tolist()[::3] == [1.0, 8.0],
          "e8m0 values")
    check(st.decode_e8m0(np.array([0], dtype=np.uint8))[0] == 2.0 ** -127, "e8m0 min")
    check(np.isnan(st.decode_e8m0(np.array([255], dtype=np.uint8))[0]), "e8m0 nan")
    check(np.array_equal(st.encode_e8m0(np.array([1.0, 0.25, 2.0 ** 40])), [127, 125, 167]),
          "e8m0 encode")
    b = st.encode_bf16(np.array([1.0, -2.5, 1.00390625, 1.01171875], dtype=np.float32))
    check(b.tolist() == [0x3F80, 0xC020, 0x3F80, 0x3F82], "bf16 round to nearest even")
    check(st.decode_bf16(np.array([0x3F80, 0xC020], dtype=np.uint16)).tolist() == [1.0, -2.5],
          "bf16 decode")


def test_pow2_scale():
    # ceil(log2(amax / 448)) computed from float32 bits
    s = st.pow2_block_scale(np.array([448.0, 449.0, 1.0, 0.0]), 448.0, 1e-4)
    check(s[1] == 2.0 and s[2] == 2.0 ** -8 and s[3] == 2.0 ** -22, f"fp8 scales {s}")
    s = st.pow2_block_scale(np.array([6.0, 6.1, 0.75]), 6.0, 6 * 2.0 ** -126)
    check(s[0] == 1.0 and s[1] == 2.0 and s[2] == 0.125, f"fp4 scales {s}")


def test_safetensors_and_dequant():
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as d:
        # FP8 weight [200, 300] with E8M0 block scales [2, 3]; FP4 weight [4, 64]
        codes = rng.integers(0, 0x7E, (200, 300)).astype(np.uint8)
        scale = rng.integers(120, 135, (2, 3)).astype(np.uint8)
        fp4 = rng.integers(-128, 128, (4, 32)).astype(np.int8)
        fp4_scale = rng.integers(120, 135, (4, 2)).astype(np.uint8)
        st.write_safetensors(os.path.join(d, "a.safetensors"), {
            "x.weight": ("F8_E4M3", codes), "x.scale": ("F8_E8M0", scale),
            "y.weight": ("I8", fp4), "y.scale": ("F8_E8M0", fp4_scale),
            "z": ("BF16", np.array([0x3F80, 0x4000], dtype=np.uint16)),
            "t": ("I64", np.arange(6, dtype=np.int64).reshape(3, 2))})
        ck = st.Checkpoint(d)
        w = ck.dequantize_weight("x")
        check(w.shape == (200, 300), "fp8 shape")
        check(w[199, 299] == st.FP8_E4M3_TABLE[codes[199, 299]] * 2.0 ** (int(scale[1, 2]) - 127),
              "fp8 block scale of a partial block")
        check(w[127, 128] == st.FP8_E4M3_TABLE[codes[127, 128]] * 2.0 ** (int(scale[0, 1]) - 127),
              "fp8 block boundary")
        v = ck.dequantize_weight("y")
        u = fp4.view(np.uint8)
        check(v.shape == (4, 64), "fp4 shape")
        check(v[3, 33] == st.FP4_E2M1_TABLE[u[3, 16] >> 4] * 2.0 ** (int(fp4_scale[3, 1]) - 127),
              "fp4 odd element in the second scale block")
        check(ck.tensor("z").tolist() == [1.0, 2.0], "bf16 tensor")
        check(ck.tensor("t").tolist() == [[0, 1], [2, 3], [4, 5]], "i64 tensor")
        check(ck.weight_format("x") == "fp8" and ck.weight_format("y") == "fp4", "formats")


if __name__ == "__main__":
    for name, fn in list(globals().items()):
        if name.startswith("test_"):
            fn()
            print(f"{name}: ok")
