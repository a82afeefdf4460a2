"""Plain data across Code-v0's process boundary, as JSON with tags for what JSON lacks. Exact types only: a subclass
of int with a lying ``__eq__`` is refused. This file runs on both sides: imported on the host, and prepended as
source to the sandbox's server and the host's interactor (their python3 has no access to this package).
"""

_SCALARS = (type(None), bool, int, float, str)


def wire_encode(value, depth=0):
    """Plain data as JSON-able values; TypeError for any other type (subclasses included)."""
    if depth > 200:
        raise TypeError("value nested too deeply")
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list:
        return [wire_encode(v, depth + 1) for v in value]
    if kind in (tuple, set, frozenset):
        items = [wire_encode(v, depth + 1) for v in value]
        return {"~": kind.__name__, "v": items}
    if kind is dict:
        return {"~": "dict", "v": [[wire_encode(k, depth + 1), wire_encode(v, depth + 1)] for k, v in value.items()]}
    if kind is complex:
        return {"~": "complex", "v": [value.real, value.imag]}
    if kind is bytes:
        return {"~": "bytes", "v": value.hex()}
    raise TypeError(
        "cannot pass a value of type %s across the judge; use builtin types "
        "(None, bool, int, float, complex, str, bytes, list, tuple, dict, set)" % kind.__name__
    )


def wire_decode(data):
    """Inverse of wire_encode; ValueError on anything it would not produce."""
    kind = type(data)
    if kind in _SCALARS:
        return data
    if kind is list:
        return [wire_decode(v) for v in data]
    if kind is not dict or set(data) != {"~", "v"}:
        raise ValueError("malformed value on the wire")
    tag, items = data["~"], data["v"]
    if tag == "tuple":
        return tuple(wire_decode(v) for v in items)
    if tag == "set":
        return set(wire_decode(v) for v in items)
    if tag == "frozenset":
        return frozenset(wire_decode(v) for v in items)
    if tag == "dict":
        return {wire_decode(k): wire_decode(v) for k, v in items}
    if tag == "complex":
        return complex(float(items[0]), float(items[1]))
    if tag == "bytes":
        return bytes.fromhex(items)
    raise ValueError("unknown tag on the wire: %r" % (tag,))
