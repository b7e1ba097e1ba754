#!/usr/bin/env python3
"""The Python test client reads the protocol from include/kairos/proto.h (proto_h.py),
and reads it right: a C program compiled here from the same header prints every
constant, every struct's size and every field's offset and size, which must equal what
proto_h found; and kairos_proto's formats are those of the header.
Usage: test_proto_h.py INCLUDE_DIR CC [CC ARGS...]"""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kairos_proto as kp  # noqa: E402
import proto_h  # noqa: E402

INCLUDE, CC = sys.argv[1], sys.argv[2:]


def c_program(constants, structs):
    out = ['#include <stdio.h>', '#include <stddef.h>', '#include "kairos/proto.h"',
           "int main(void)", "{"]
    for name in sorted(constants):
        out.append(f'    printf("C {name} %llu\\n", (unsigned long long)({name}));')
    for s, layout in structs.items():
        out.append(f'    printf("S {s} %zu\\n", sizeof(struct {s}));')
        for field, *_ in layout.fields:
            out.append(f'    printf("F {s}.{field} %zu %zu\\n", offsetof(struct {s}, {field}), '
                       f'sizeof(((struct {s} *)0)->{field}));')
    out += ["    return 0;", "}"]
    return "\n".join(out) + "\n"


def compiled(constants, structs):
    """What the C compiler says: {"C NAME": value, "S name": size, "F s.f": (off, size)}."""
    with tempfile.TemporaryDirectory(prefix="kairos-proto-h-") as d:
        src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
        with open(src, "w") as f:
            f.write(c_program(constants, structs))
        subprocess.run(CC + ["-std=c17", "-Wall", "-Werror", "-I", INCLUDE, "-o", exe, src],
                       check=True)
        lines = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    out = {}
    for line in lines.splitlines():
        kind, name, *nums = line.split()
        nums = tuple(int(n) for n in nums)
        out[f"{kind} {name}"] = nums[0] if len(nums) == 1 else nums
    return out


class ProtoH(unittest.TestCase):
    maxDiff = None

    def test_the_header_read_in_python_is_the_header_compiled(self):
        constants, structs = proto_h.read()
        self.assertGreater(len(constants), 50)
        self.assertGreater(len(structs), 20)
        python = {f"C {k}": v for k, v in constants.items()}
        for s, layout in structs.items():
            python[f"S {s}"] = layout.size
            for field, _, _, offset, size, _ in layout.fields:
                python[f"F {s}.{field}"] = (offset, size)
        self.assertEqual(python, compiled(constants, structs))

    def test_every_struct_of_the_header_is_read(self):
        with open(proto_h.HEADER) as f:
            text = f.read()
        import re
        names = set(re.findall(r"^struct (\w+) \{$", text, re.M))
        self.assertEqual(names, set(proto_h.read()[1]))

    def test_the_client_uses_the_headers_layouts(self):
        _, s = proto_h.read()
        self.assertEqual(kp.HDR.format, s["kairos_hdr"].struct.format)
        self.assertEqual(kp.CREDIT_FMT, s["kairos_credit"].fmt)
        self.assertEqual(kp.TENANT_SET_FMT.size, 392)
        self.assertEqual(kp.PS_REPLY_FMT.size, kp.PS_REPLY_SIZE_V1)
        self.assertEqual(kp.PS_REPLY_FMT.size + kp.PS_HOLDS_FMT.size + kp.PS_FAULTS_FMT.size,
                         s["kairos_ps_reply"].size)
        self.assertEqual((kp.MAGIC, kp.VERSION, kp.IMPORTED, kp.TIME_POLICY),
                         (0x4b524f53, 3, 23, 37))  # a few, by hand, against the reader

    def test_a_header_it_cannot_read_is_refused(self):
        with open(proto_h.HEADER) as f:
            text = f.read()
        for old, new, why in [
                ("    uint32_t pad;\n    uint64_t bytes;\n};",
                 "    uint64_t bytes;\n};", "padding"),
                ("    uint32_t gpu;\n    uint32_t flags;\n    uint64_t seq;",
                 "    uint32_t gpu;\n    float flags;\n    uint64_t seq;", "flags"),
        ]:
            self.assertIn(old, text)
            with tempfile.NamedTemporaryFile("w", suffix=".h") as f:
                f.write(text.replace(old, new, 1))
                f.flush()
                with self.assertRaises((ValueError, KeyError), msg=why):
                    proto_h.read(f.name)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
