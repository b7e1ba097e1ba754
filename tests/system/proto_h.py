"""proto_h - the wire protocol's numbers and struct layouts read from
include/kairos/proto.h itself, so that the Python test client (kairos_proto.py) cannot
stay on an old protocol: its constants and struct formats come from here.

read() gives (constants, structs): constants maps every KAIROS_* name of an enum or
of a #define with an integer value to that value; structs maps each struct's name
("kairos_credit") to a Layout: its fields in order as (name, C type, dimensions,
offset, size) and a little-endian struct.Struct over the whole. The header keeps its
structs free of implicit padding (proto.h's static_asserts), and read() refuses one
that is not, or a line it cannot read, rather than guess.
test_proto_h.py checks every constant, size and offset against the C compiler."""
import os
import re
import struct

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include",
                      "kairos", "proto.h")
# C type -> struct format character (little endian, standard sizes)
TYPES = {"uint8_t": "B", "uint16_t": "H", "uint32_t": "I", "uint64_t": "Q",
         "int8_t": "b", "int16_t": "h", "int32_t": "i", "int64_t": "q", "char": "s"}
DEFINE = re.compile(r"^#define\s+(KAIROS_\w+)\s+(.*?)\s*(?:/\*.*)?$")
ENUM_MEMBER = re.compile(r"(KAIROS_\w+)\s*=\s*([^,}]+?)\s*(?:,|}|$)")
FIELD = re.compile(r"^\s*(?:struct\s+(\w+)|(\w+))\s+(\w+)((?:\[\w+\])*);")
EXPR = re.compile(r"^[\w\s()<|+*-]+$")


class Layout:
    def __init__(self, name, fields, size):
        self.name, self.fields, self.size = name, fields, size
        self.fmt = "<" + "".join(f[5] for f in fields)
        self.struct = struct.Struct(self.fmt)
        assert self.struct.size == size, (name, self.fmt, size)

    def offset(self, field):
        return next(f[3] for f in self.fields if f[0] == field)

    def _range(self, first, stop):
        names = [f[0] for f in self.fields]
        return self.fields[names.index(first) if first else 0:
                           names.index(stop) if stop else len(names)]

    def part(self, first=None, stop=None):
        """A struct.Struct of the fields from first (None: the start) up to stop (not
        included; None: the end)."""
        return struct.Struct("<" + "".join(f[5] for f in self._range(first, stop)))

    def values(self, data, first=None, stop=None):
        """The fields of data (the bytes of fields first up to stop) by name: a number,
        bytes (a char array), or a flat list (other arrays, inner structs)."""
        flat, out, i = self.part(first, stop).unpack(data), {}, 0
        for name, ctype, counts, _, _, fmt in self._range(first, stop):
            n = len(struct.unpack("<" + fmt, bytes(struct.calcsize("<" + fmt))))
            v = flat[i:i + n]
            out[name] = v[0] if n == 1 and (not counts or ctype == "char") else list(v)
            i += n
        return out

    def pack(self, first=None, stop=None, **fields):
        """The bytes of fields first up to stop, each given by name (a number, a str or
        bytes for a char array, a list for an array, shorter lists padded with 0) or 0."""
        flat = []
        for name, ctype, counts, _, _, fmt in self._range(first, stop):
            n = len(struct.unpack("<" + fmt, bytes(struct.calcsize("<" + fmt))))
            v = fields.pop(name, 0)
            if isinstance(v, str):
                v = v.encode()
            if ctype == "char" and n == 1:
                flat.append(v or b"")
            else:
                v = list(v) if isinstance(v, (list, tuple)) else [v] * (1 if n == 1 else 0)
                v = [x.encode() if isinstance(x, str) else x for x in v]
                flat += v + [b"" if ctype == "char" else 0] * (n - len(v))
        if fields:
            raise KeyError(f"{self.name} has no field {sorted(fields)}")
        return self.part(first, stop).pack(*flat)


def value(expr, constants):
    """The value of an integer expression of the header (literals with u/ull suffixes,
    <<, |, names already read, UINT64_MAX); None when it is not one (a string)."""
    expr = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", expr.strip())
    if not expr or not EXPR.match(expr):
        return None
    names = dict(constants, UINT64_MAX=(1 << 64) - 1)
    for word in re.findall(r"\b[A-Za-z_]\w*\b", expr):
        if word not in names:
            raise ValueError(f"proto.h: unknown name {word} in {expr!r}")
    return int(eval(expr, {"__builtins__": {}}, names))  # checked: names and operators


def note(constants, name, v):
    if name in constants and constants[name] != v:
        raise ValueError(f"proto.h: {name} is both {constants[name]} and {v}")
    constants[name] = v


def read_struct(name, body, constants, structs):
    fields, offset, align = [], 0, 1
    for line in body:
        line = re.sub(r"/\*.*?(\*/|$)", "", line).strip()
        if not line or line.startswith("*"):
            continue
        m = FIELD.match(line)
        if not m:
            raise ValueError(f"proto.h: struct {name}: cannot read {line!r}")
        inner, ctype, field, dims = m.groups()
        counts = [constants[d] if d in constants else int(d)
                  for d in re.findall(r"\[(\w+)\]", dims)]
        n = 1
        for c in counts:
            n *= c
        if inner:
            sub = structs[inner]
            esize, ealign, efmt = sub.size, max(struct.calcsize(f[5][-1]) for f in
                                                sub.fields), sub.fmt[1:] * n
        elif ctype == "char":
            esize, ealign = 1, 1
            row = counts[-1] if counts else 1
            efmt = f"{row}s" * (n // row)
        else:
            esize = ealign = struct.calcsize(TYPES[ctype])
            efmt = f"{n}{TYPES[ctype]}" if n > 1 else TYPES[ctype]
        if offset % ealign:
            raise ValueError(f"proto.h: struct {name}: padding before {field}")
        size = esize * n
        fields.append((field, f"struct {inner}" if inner else ctype, counts, offset, size,
                       efmt))
        offset += size
        align = max(align, ealign)
    if offset % align:
        raise ValueError(f"proto.h: struct {name}: padding at its end")
    structs[name] = Layout(name, fields, offset)


def read(path=HEADER):
    with open(path) as f:
        lines = f.read().splitlines()
    constants, structs, i = {}, {}, 0
    while i < len(lines):
        line = lines[i]
        m = DEFINE.match(line)
        if m:
            v = value(m.group(2), constants)
            if v is not None:
                note(constants, m.group(1), v)
        elif line.startswith("enum "):
            text = line
            while "}" not in text:
                i += 1
                text += "\n" + re.sub(r"/\*.*?(\*/|$)", "", lines[i])
            for name, expr in ENUM_MEMBER.findall(re.sub(r"/\*.*?\*/", "", text)):
                note(constants, name, value(expr, constants))
        else:
            m = re.match(r"^struct (\w+) \{$", line)
            if m:
                body = []
                i += 1
                while lines[i] != "};":
                    body.append(lines[i])
                    i += 1
                read_struct(m.group(1), body, constants, structs)
        i += 1
    return constants, structs
