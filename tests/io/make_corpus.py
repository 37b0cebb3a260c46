#!/usr/bin/env python3
"""tests/io/make_corpus.py - writes the seed files of tests/io/corpus/.

valid_* files must load; bad_* files must be refused with a message; any
other name (fuzz-*: a minimized corpus from a 4-minute libFuzzer run;
crash-*: anything the fuzzer ever finds) must merely not crash.
The files are committed, so CI needs no Python; rerun this after changing a
seed.  Only the standard library is used.
"""
import json
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def raw(name, header_bytes, data=b"", length=None):
    n = len(header_bytes) if length is None else length
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(struct.pack("<Q", n) + header_bytes + data)


def st(name, header, data=b"", pad=True):
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    raw(name, h, data)


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


os.makedirs(HERE, exist_ok=True)

# ---- valid seeds -----------------------------------------------------------
st("valid_empty.safetensors", {})
st("valid_metadata_only.safetensors", {"__metadata__": {"format": "pt", "k": "v\u00e9"}})
st("valid_f32_2x2.safetensors", {"w": entry("F32", [2, 2], 0, 16)},
   struct.pack("<4f", 1.0, 2.0, 3.0, 4.0))
sizes = [("F64", 8), ("I64", 8), ("F32", 4), ("I32", 4), ("BF16", 2), ("F16", 2),
         ("I16", 2), ("BOOL", 1), ("I8", 1), ("U8", 1)]
hdr, data = {"__metadata__": {"source": "make_corpus.py"}}, b""
for dt, isz in sizes:
    hdr[dt.lower()] = entry(dt, [3], len(data), len(data) + 3 * isz)
    data += (b"\x01\x00\x01" if dt == "BOOL" else bytes(range(3 * isz)))
st("valid_all_dtypes.safetensors", hdr, data)
st("valid_scalar_and_empty.safetensors",
   {"s": entry("I64", [], 0, 8), "e": entry("F32", [0, 4], 8, 8)}, struct.pack("<q", -5))
st("valid_misaligned.safetensors", {"f": entry("F32", [2], 0, 8), "c": entry("U8", [1], 8, 9)},
   struct.pack("<2f", 0.5, 1.5) + b"\x07", pad=False)
st("valid_unicode_name.safetensors", {"w\u00e9ight\U0001F600": entry("U8", [2], 0, 2)}, b"ab")
st("valid_8_dims.safetensors", {"t": entry("I8", [1, 1, 1, 1, 1, 1, 2, 1], 0, 2)}, b"\x01\x02")

# ---- corrupt seeds ---------------------------------------------------------
with open(os.path.join(HERE, "bad_short.safetensors"), "wb") as f:
    f.write(b"\x05\x00\x00")
raw("bad_header_over_limit.safetensors", b"{}", length=100000001)
raw("bad_header_past_end.safetensors", b"{}", length=50)
raw("bad_not_an_object.safetensors", b"[]      ")
raw("bad_trailing_comma.safetensors", b'{"a":1,}')
raw("bad_invalid_utf8.safetensors", b'{"\xc3\x28":1}')
raw("bad_duplicate_key.safetensors", b'{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},'
                                     b'"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}')
raw("bad_nul_in_name.safetensors", b'{"a\\u0000":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}')
raw("bad_deep_nesting.safetensors", b'{"a":' + b"[" * 100 + b"]" * 100 + b"}")
st("bad_dtype_c64.safetensors", {"w": entry("C64", [1], 0, 8)}, b"\0" * 8)
st("bad_offsets_do_not_match_shape.safetensors", {"w": entry("F32", [2, 2], 0, 12)}, b"\0" * 12)
st("bad_gap.safetensors", {"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)},
   b"\0" * 12)
st("bad_overlap.safetensors", {"a": entry("F32", [2], 0, 8), "b": entry("F32", [1], 4, 8)},
   b"\0" * 8)
st("bad_trailing_bytes.safetensors", {"a": entry("F32", [1], 0, 4)}, b"\0" * 8)
st("bad_past_end.safetensors", {"a": entry("F32", [2], 0, 8)}, b"\0" * 4)
st("bad_reversed_offsets.safetensors", {"a": entry("F32", [1], 8, 4)}, b"\0" * 8)
st("bad_shape_overflow.safetensors", {"a": entry("U8", [2**32, 2**32], 0, 4)}, b"\0" * 4)
st("bad_negative_dim.safetensors", {"a": entry("F32", [-1], 0, 4)}, b"\0" * 4)
st("bad_nine_dims.safetensors", {"a": entry("F32", [1] * 9, 0, 4)}, b"\0" * 4)
st("bad_metadata_number.safetensors", {"__metadata__": {"k": 1}})
st("bad_bool_value.safetensors", {"m": entry("BOOL", [3], 0, 3)}, b"\x01\x02\x00")
st("bad_missing_field.safetensors", {"a": {"dtype": "F32", "shape": [1]}}, b"\0" * 4)
st("bad_unknown_field.safetensors", {"a": dict(entry("F32", [1], 0, 4), foo=1)}, b"\0" * 4)
st("bad_offset_too_big.safetensors", {"a": entry("F32", [1], 0, 2**64)}, b"\0" * 4)
