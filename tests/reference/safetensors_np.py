"""Minimal safetensors reader/writer and DeepSeek-V4 number formats, in numpy only.

Independent of flint's C++ code: the decoders below are written from the format definitions
(safetensors header, OCP FP8/FP4 and E8M0), so the reference reads a checkpoint the same way
DeepSeek's own code does without sharing a line with the engine under test.

Formats handled
  BF16        upper half of an IEEE float32
  F8_E4M3     E4M3FN: bias 7, subnormals, no infinities, 0x7F/0xFF are NaN, max 448
  F8_E8M0     exponent only: 2^(e - 127), 0xFF is NaN
  packed FP4  E2M1 stored as I8 [out, in/2]: low nibble = even element, high nibble = odd
              element, bit 3 = sign, magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}
Weight layouts (see dequantize_weight)
  FP8 weight [out, in] + one scale (E8M0 or F32) per 128x128 block: scale [ceil(out/128), ceil(in/128)]
  FP4 weight I8 [out, in/2] + one E8M0 scale per 32 inputs: scale [out, in/32]

Also the rounding functions used to simulate DeepSeek's activation quantisation
(round_to_fp8_e4m3, round_to_fp4_e2m1, pow2_block_scale) and encoders used by the test
checkpoint writer (make_test_checkpoint.py).
"""
import json
import os
import struct

import numpy as np

# ----------------------------------------------------------------------------------------
# Decoders
# ----------------------------------------------------------------------------------------


def _fp8_e4m3fn_table():
    """Value of every E4M3FN code, built from the bit fields (index = code)."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent = (codes >> 3) & 0xF
    mantissa = codes & 0x7
    magnitude = np.where(exponent == 0,
                         mantissa * 2.0 ** -9,                     # subnormal: m/8 * 2^-6
                         (1.0 + mantissa / 8.0) * np.ldexp(1.0, exponent - 7))
    values = sign * magnitude
    values[(exponent == 0xF) & (mantissa == 0x7)] = np.nan        # 0x7F, 0xFF
    return values


FP8_E4M3_TABLE = _fp8_e4m3fn_table()            # float64 [256]
FP8_E4M3_MAX = 448.0
FP4_E2M1_TABLE = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                           -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
FP4_E2M1_MAX = 6.0


def decode_bf16(raw_u16):
    """BF16 codes (uint16) -> float32 (exact)."""
    return (raw_u16.astype(np.uint32) << 16).view(np.float32)


def decode_fp8_e4m3(raw_u8):
    """E4M3FN codes (uint8) -> float64 (exact)."""
    return FP8_E4M3_TABLE[raw_u8.view(np.uint8)]


def decode_e8m0(raw_u8):
    """E8M0 codes -> float64 powers of two 2^(e-127); code 255 is NaN."""
    e = raw_u8.view(np.uint8).astype(np.int32)
    values = np.ldexp(1.0, e - 127)
    return np.where(e == 255, np.nan, values)


def decode_fp4_e2m1_packed(raw_i8):
    """Packed FP4 [rows, cols/2] (int8 or uint8) -> float64 [rows, cols]."""
    u = raw_i8.view(np.uint8)
    out = np.empty(u.shape[:-1] + (u.shape[-1] * 2,), dtype=np.float64)
    out[..., 0::2] = FP4_E2M1_TABLE[u & 0x0F]
    out[..., 1::2] = FP4_E2M1_TABLE[u >> 4]
    return out


# ----------------------------------------------------------------------------------------
# Rounding (simulation of FP8 / FP4 casts: round to nearest, ties to even, saturating)
# ----------------------------------------------------------------------------------------


def _round_to_grid(x, mantissa_bits, min_exponent, max_value):
    """Rounds to a binary float grid with `mantissa_bits` fraction bits whose smallest normal
    exponent is `min_exponent` (below it the step stays 2^(min_exponent - mantissa_bits),
    i.e. subnormals). np.round rounds half to even, so ties go to the even code."""
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    _, e = np.frexp(ax)                       # ax = m * 2^e, m in [0.5, 1): floor(log2) = e - 1
    step_exp = np.maximum(e - 1 - mantissa_bits, min_exponent - mantissa_bits)
    q = np.ldexp(np.round(np.ldexp(ax, -step_exp)), step_exp)
    q = np.minimum(q, max_value)              # satfinite
    return np.copysign(q, x)


def round_to_fp8_e4m3(x):
    """Nearest E4M3FN value (ties to even), saturating at +-448; float64 out."""
    return _round_to_grid(x, 3, -6, FP8_E4M3_MAX)


def round_to_fp4_e2m1(x):
    """Nearest E2M1 value (ties to even), saturating at +-6; float64 out."""
    return _round_to_grid(x, 1, 0, FP4_E2M1_MAX)


def pow2_block_scale(amax, max_value, amax_floor):
    """DeepSeek's ue8m0 scale of a block: the smallest power of two >= amax / max_value.

    Emulates kernel_tilelang.py fast_round_scale (lines 22-37): the block's amax is a float32,
    floored at `amax_floor` (1e-4 for FP8, 6 * 2^-126 for FP4), multiplied in float32 by the
    float32 constant 1/max_value, and ceil(log2) is read off the float32 bits (exact).
    """
    a = np.maximum(np.asarray(amax, dtype=np.float32), np.float32(amax_floor))
    a = a * np.float32(1.0 / max_value)                    # float32 product, as on the GPU
    m, e = np.frexp(a.astype(np.float64))
    k = np.where(m == 0.5, e - 1, e)                       # exact powers of two keep their log
    return np.ldexp(1.0, k)


# ----------------------------------------------------------------------------------------
# Encoders (test checkpoint writer)
# ----------------------------------------------------------------------------------------

def encode_fp8_e4m3(values_on_grid):
    """float values already on the E4M3 grid -> uint8 codes."""
    v = np.asarray(values_on_grid, dtype=np.float64)
    pos = FP8_E4M3_TABLE[:0x7F]
    idx = np.searchsorted(pos, np.abs(v))
    if np.any(pos[np.minimum(idx, 0x7E)] != np.abs(v)):
        raise ValueError("encode_fp8_e4m3: value not representable")
    return (idx.astype(np.uint8) | np.where(np.signbit(v), 0x80, 0).astype(np.uint8))


def encode_fp4_e2m1_packed(values_on_grid):
    """float [rows, cols] on the E2M1 grid -> packed int8 [rows, cols/2] (low nibble even)."""
    v = np.asarray(values_on_grid, dtype=np.float64)
    pos = FP4_E2M1_TABLE[:8]
    idx = np.searchsorted(pos, np.abs(v))
    if np.any(pos[np.minimum(idx, 7)] != np.abs(v)):
        raise ValueError("encode_fp4_e2m1_packed: value not representable")
    codes = idx.astype(np.uint8) | np.where(np.signbit(v) & (v != 0), 8, 0).astype(np.uint8)
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8).view(np.int8)


def encode_e8m0(powers_of_two):
    v = np.asarray(powers_of_two, dtype=np.float64)
    m, e = np.frexp(v)
    if np.any(m != 0.5):
        raise ValueError("encode_e8m0: not a power of two")
    return (e - 1 + 127).astype(np.uint8)


def encode_bf16(x):
    """float -> BF16 codes (uint16), round to nearest even."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


# ----------------------------------------------------------------------------------------
# safetensors files
# ----------------------------------------------------------------------------------------

_STORAGE = {  # safetensors dtype -> numpy storage dtype of the raw bytes
    "BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16,
    "I32": np.int32, "U32": np.uint32, "I64": np.int64, "U64": np.uint64,
    "F16": np.float16, "BF16": np.uint16, "F32": np.float32, "F64": np.float64,
    "F8_E4M3": np.uint8, "F8_E5M2": np.uint8, "F8_E8M0": np.uint8,
}


class SafetensorsFile:
    """One .safetensors file, memory-mapped. raw(name) returns the stored bytes as a numpy array
    of the storage dtype (BF16 as uint16, FP8/E8M0 as uint8) without copying."""

    def __init__(self, path):
        self.path = path
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise ValueError(f"{path}: too short for a safetensors header")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8:
                raise ValueError(f"{path}: header length {n} exceeds the file size {size}")
            header = json.loads(f.read(n))
        self.data_start = 8 + n
        self.metadata = header.pop("__metadata__", {})
        self.tensors = header
        self._map = np.memmap(path, dtype=np.uint8, mode="r")
        for name, info in header.items():
            if info["dtype"] not in _STORAGE:
                continue  # unknown dtypes are reported when read
            begin, end = info["data_offsets"]
            want = int(np.prod(info["shape"], dtype=np.int64)) * np.dtype(_STORAGE[info["dtype"]]).itemsize
            if end - begin != want or self.data_start + end > size:
                raise ValueError(f"{path}: tensor {name}: byte range {begin}..{end} does not "
                                 f"hold {info['dtype']} {info['shape']}")

    def keys(self):
        return self.tensors.keys()

    def dtype(self, name):
        return self.tensors[name]["dtype"]

    def shape(self, name):
        return tuple(self.tensors[name]["shape"])

    def raw(self, name):
        info = self.tensors[name]
        storage = _STORAGE.get(info["dtype"])
        if storage is None:
            raise ValueError(f"{self.path}: tensor {name}: unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        buf = self._map[self.data_start + begin:self.data_start + end]
        return buf.view(storage).reshape(info["shape"])


class Checkpoint:
    """A checkpoint directory: model.safetensors.index.json (sharded), else every *.safetensors."""

    def __init__(self, directory):
        self.directory = directory
        index = os.path.join(directory, "model.safetensors.index.json")
        self._files = {}
        self._where = {}
        if os.path.exists(index):
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
            for name, file in weight_map.items():
                self._where[name] = self._file(file)
            for name, sf in self._where.items():
                if name not in sf.tensors:
                    raise ValueError(f"{index}: {name} is mapped to {sf.path}, which lacks it")
        else:
            files = sorted(f for f in os.listdir(directory) if f.endswith(".safetensors"))
            if not files:
                raise ValueError(f"{directory}: no *.safetensors files")
            for file in files:
                sf = self._file(file)
                for name in sf.keys():
                    self._where[name] = sf

    def _file(self, file):
        if file not in self._files:
            self._files[file] = SafetensorsFile(os.path.join(self.directory, file))
        return self._files[file]

    def __contains__(self, name):
        return name in self._where

    def keys(self):
        return self._where.keys()

    def dtype(self, name):
        return self._where[name].dtype(name)

    def shape(self, name):
        return self._where[name].shape(name)

    def raw(self, name):
        if name not in self._where:
            raise KeyError(f"{self.directory}: tensor {name} is missing")
        return self._where[name].raw(name)

    def tensor(self, name):
        """Decoded value: floats as float64 (BF16/FP8/E8M0 decoded), integers unchanged.
        Packed FP4 (I8) is returned as raw int8: use dequantize_weight for it."""
        dtype, raw = self.dtype(name), self.raw(name)
        if dtype == "BF16":
            return decode_bf16(raw).astype(np.float64)
        if dtype == "F8_E4M3":
            return decode_fp8_e4m3(raw)
        if dtype == "F8_E8M0":
            return decode_e8m0(raw)
        if dtype in ("F16", "F32", "F64"):
            return raw.astype(np.float64)
        return np.array(raw)

    def weight_format(self, prefix):
        """'fp8', 'fp4' or 'plain' for the linear weight `prefix`.weight."""
        dtype = self.dtype(prefix + ".weight")
        if dtype == "F8_E4M3":
            return "fp8"
        if dtype == "I8" and prefix + ".scale" in self:
            return "fp4"
        return "plain"

    def dequantize_weight(self, prefix):
        """Exact float64 value of the linear weight `prefix`.weight [out, in], applying
        `prefix`.scale: per 128x128 block for FP8, per 32 inputs for packed FP4."""
        name = prefix + ".weight"
        fmt = self.weight_format(prefix)
        if fmt == "plain":
            return self.tensor(name)
        scale = self.tensor(prefix + ".scale")
        if fmt == "fp8":
            w = decode_fp8_e4m3(self.raw(name))
            rows, cols = w.shape
            want = (-(-rows // 128), -(-cols // 128))
            if scale.shape != want:
                raise ValueError(f"{prefix}.scale: shape {scale.shape}, expected {want} for "
                                 f"128x128 blocks of an FP8 weight {w.shape}")
            full = np.repeat(np.repeat(scale, 128, axis=0), 128, axis=1)[:rows, :cols]
            return w * full
        w = decode_fp4_e2m1_packed(self.raw(name))
        rows, cols = w.shape
        if scale.shape != (rows, cols // 32) or cols % 32:
            raise ValueError(f"{prefix}.scale: shape {scale.shape}, expected {(rows, cols // 32)}"
                             f" for 32-input blocks of an FP4 weight [{rows}, {cols}]")
        return w * np.repeat(scale, 32, axis=1)


def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> (safetensors dtype string, numpy array holding the raw storage)."""
    header = {}
    offset = 0
    names = sorted(tensors)
    for name in names:
        dtype, array = tensors[name]
        nbytes = array.nbytes
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    if metadata:
        header["__metadata__"] = metadata
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name in names:
            f.write(np.ascontiguousarray(tensors[name][1]).tobytes())
