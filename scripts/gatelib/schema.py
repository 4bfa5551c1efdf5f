"""schema — the one validator of a results directory's files against results/schema.json, used by
scripts/compare, scripts/report and the tests (through scripts/validate).

  row_error(row)            why a parsed .jsonl line is not a results row ("field: why"), or None
  manifest_error(m)         the same for manifest.json
  trace_error(t)            the same for a <benchmark>.trace.json
  markdown()                results/schema.md's generated field tables

JSON Schema (python3-jsonschema, Debian's) checks the required fields and the types; what it cannot
state is checked here after it (RELATIONS): the time statistics' order, time.samples' length and
kind, and that gate names a metric with a value. Each error names the field as a dotted path
(metrics.busbw.value, time.samples[3]); the callers add the file and line.
"""
import json
import math
import os

from .cli import Failure

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "results", "schema.json")
SCHEMA_NAME = "results/schema.json"
SKETCH = 32  # time.samples: all samples up to this many, else this many quantiles

_validators = {}


def _validator(kind):
    """The Draft 2020-12 validator of $defs/<kind>, made once. jsonschema missing is a Failure
    (exit 3) naming the package: nothing can be validated without it."""
    if kind in _validators:
        return _validators[kind]
    try:
        import jsonschema
    except ImportError:
        raise Failure("validating results needs the Python package jsonschema: install python3-jsonschema "
                      "(Debian/Ubuntu: apt-get install python3-jsonschema; scripts/install-deps.sh does)") from None
    try:
        with open(SCHEMA_PATH, encoding="utf-8") as f:
            schema = json.load(f)
    except (OSError, ValueError) as e:
        raise Failure(f"cannot read {SCHEMA_NAME}: {e}") from None
    # the root with a $ref to the definition: one document, so "#/$defs/..." resolves without a
    # resolver (whose API differs between jsonschema releases)
    _validators[kind] = jsonschema.Draft202012Validator(dict(schema, **{"$ref": f"#/$defs/{kind}"}))
    return _validators[kind]


def load_schema():
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return json.load(f)


JSON_TYPES = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
              float: "a number", type(None): "null"}
TYPE_NAMES = {"object": "an object", "array": "a list", "string": "a string", "boolean": "a boolean",
              "integer": "an integer", "number": "a number", "null": "null"}


def _field(path):
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(the object)"


def _show(v):
    s = json.dumps(v)
    return s if len(s) <= 40 else s[:37] + "..."


def _describe(e):
    """(field, why) of one jsonschema error, in words a user of the suite reads."""
    path = list(e.absolute_path)
    if e.validator == "required":
        missing = [k for k in e.validator_value if isinstance(e.instance, dict) and k not in e.instance]
        return _field(path + missing[:1]), "missing (a required field)"
    if e.validator == "type":
        want = e.validator_value if isinstance(e.validator_value, list) else [e.validator_value]
        got = JSON_TYPES.get(type(e.instance), type(e.instance).__name__)
        return _field(path), f"{_show(e.instance)} is {got}, expected {' or '.join(TYPE_NAMES[t] for t in want)}"
    if e.validator == "enum":
        return _field(path), f"{_show(e.instance)} is not one of {', '.join(map(json.dumps, e.validator_value))}"
    if e.validator == "const":
        return _field(path), f"{_show(e.instance)}, expected {json.dumps(e.validator_value)}"
    return _field(path), e.message


def _first_error(kind, obj):
    errors = sorted(_validator(kind).iter_errors(obj), key=lambda e: len(e.absolute_path))
    if not errors:
        return None
    field, why = _describe(errors[0])
    return f"{field}: {why}"


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _relations(r):
    """What JSON Schema cannot state about a row that passed it: "field: why", or None."""
    t = r.get("time")
    if isinstance(t, dict):
        if not t["min"] <= t["median"] <= t["max"] or not t["min"] <= t["p95"] <= t["max"]:
            return (f"time: statistics out of order (min {t['min']}, median {t['median']}, p95 {t['p95']}, "
                    f"max {t['max']})")
        if r["schema_version"] >= 2:
            x, kind, timed = t["samples"], t["samples_kind"], r["iterations"]["timed"]
            if len(x) != min(timed, SKETCH):
                return f"time.samples: {len(x)} numbers, expected min(iterations.timed = {timed}, {SKETCH})"
            if kind != ("all" if timed <= SKETCH else "quantiles"):
                return f"time.samples_kind: {json.dumps(kind)} with {timed} timed iterations"
            if x and kind == "all" and (min(x) != t["min"] or max(x) != t["max"]):
                return f"time.samples: min/max {min(x)}/{max(x)} differ from time.min/max {t['min']}/{t['max']}"
            if x and kind == "quantiles" and (x != sorted(x) or x[0] < t["min"] or x[-1] > t["max"]):
                return "time.samples: quantiles must ascend within [time.min, time.max]"
    g = r.get("gate")
    if g is not None:
        m = r["metrics"].get(g)
        if not isinstance(m, dict) or not _is_num(m.get("value")) or not math.isfinite(m["value"]):
            return f"gate: {json.dumps(g)} names no metric of the row with a value"
    return None


def row_error(row):
    """Why a parsed .jsonl line is not a results row of results/schema.json ("field: why"), or
    None."""
    if not isinstance(row, dict):
        return f"a JSON {JSON_TYPES.get(type(row), type(row).__name__).split()[-1]}, not an object"
    return _first_error("row", row) or _relations(row)


def manifest_error(m):
    if not isinstance(m, dict):
        return "not a JSON object"
    return _first_error("manifest", m)


def trace_error(t):
    if not isinstance(t, dict):
        return "not a JSON object"
    return _first_error("trace", t)


# results/schema.md's generated tables -------------------------------------------------------------

def _type_of(s):
    if "const" in s:
        return json.dumps(s["const"])
    if "enum" in s:
        kinds = {None: "null", str: "string", int: "int"}
        return " or ".join(dict.fromkeys(kinds[type(v)] if v is not None else "null" for v in s["enum"]))
    t = s.get("type", "")
    t = t if isinstance(t, list) else [t]
    words = {"integer": "int", "number": "number", "string": "string", "boolean": "bool", "object": "object",
             "array": "list", "null": "null"}
    if "array" in t and isinstance(s.get("items"), dict) and "type" in s["items"]:
        return f"[{words[s['items']['type']]}]"
    if "$ref" in s:
        return "object"
    return " or ".join(words[x] for x in t if x)


def _field_rows(props, required, prefix="", depth=1):
    out = []
    for name, s in props.items():
        if "$ref" in s and "properties" not in s:
            continue  # a shared definition (simulated): its own section
        mark = " R" if name in required else ""
        desc = s.get("description", "")
        values = [v for v in s.get("enum", []) if isinstance(v, (str, int))]
        if values and not all(f"`{v}`" in desc for v in values):
            desc += f" (one of {', '.join(f'`{v}`' for v in values)})"
        desc = desc.replace("|", "\\|")
        out.append(f"| `{prefix}{name}`{mark} | {_type_of(s)} | {desc} |")
        if depth and isinstance(s.get("properties"), dict) and name not in ("params", "metrics"):
            sub = s["properties"]
            if all("description" in v for v in sub.values()):
                out += _field_rows(sub, s.get("required", []), f"{prefix}{name}.", depth - 1)
    return out


def _program(defs, name):
    """(params {name: type}, metrics {name: unit}, patterns) of $defs/<name>, with what it
    takes from the $defs it refers to."""
    return _program_of(defs, defs[name])


def _program_of(defs, s):
    """_program of the schema s: its allOf parts, and both branches of an if (vdnn: the conv
    stack's rows and the training layer's)."""
    params, metrics, patterns = {}, {}, []
    for part in s.get("allOf", []) + [s] + [s[k] for k in ("then", "else") if k in s]:
        if "$ref" in part or (part is not s and ("allOf" in part or "then" in part)):
            p, m, pt = _program(defs, part["$ref"].split("/")[-1]) if "$ref" in part else _program_of(defs, part)
            params.update(p), metrics.update(m), patterns.extend(pt)
        props = part.get("properties", {})
        for k, v in props.get("params", {}).get("properties", {}).items():
            params[k] = _type_of(v).replace(" or null", "")
        for k, v in props.get("metrics", {}).get("properties", {}).items():
            unit = v["properties"]["unit"]  # one unit, or a choice of them (enum)
            metrics[k] = unit["const"] if "const" in unit else " or ".join(u or '""' for u in unit["enum"])
        patterns += list(props.get("metrics", {}).get("patternProperties", {}))
    return params, metrics, patterns


def markdown():
    """The field tables of results/schema.md between its 'generated' markers, from schema.json."""
    schema = load_schema()
    defs = schema["$defs"]
    out = ["<!-- generated from results/schema.json by `scripts/validate md`: edit the schema, not this -->", ""]
    out += ["### manifest.json fields", ""]
    out += ["Required fields are marked R (version 2 manifests also require `ranks_per_node`, "
            "`cpus_per_node` and `oversubscribed`); all others may be null or absent.", ""]
    out += ["| field | type | meaning |", "|---|---|---|"]
    out += _field_rows(defs["manifest"]["properties"], defs["manifest"]["required"], depth=2)
    out += ["", "### <benchmark>.jsonl row fields", "",
            "Required fields are marked R; all others may be null or absent (version 2 rows also require "
            "`gate`, and a timed row's `time.samples` and `time.samples_kind`).", "",
            "| field | type | meaning |", "|---|---|---|"]
    out += _field_rows(defs["row"]["properties"], defs["row"]["required"])
    sim = defs["simulated"]
    out += ["", f"`simulated` (rows and manifest): {sim['description']}: "
            + ", ".join(f"`{k}`" for k in sim["properties"]) + ".", ""]
    out += ["### Each program's params and metrics", "",
            "The names each program writes, with each param's type and each metric's unit (checked); "
            "a program may write names not listed (accepted, with the types every param and metric has).", "",
            "| program | params | metrics (unit) |", "|---|---|---|"]
    for name in sorted(k for k in defs if k.startswith("program_")):
        params, metrics, patterns = _program(defs, name)
        p = ", ".join(f"`{k}` ({t})" for k, t in sorted(params.items()))
        m = ", ".join(f"`{k}` ({u or '—'})" for k, u in sorted(metrics.items()))
        m += "".join(f", `{pt}` (pattern)" for pt in patterns)
        cells = [c.replace("|", "\\|") for c in (f"`{name[len('program_'):]}`", p, m)]
        out.append(f"| {cells[0]} | {cells[1]} | {cells[2]} |")
    out += ["", ""]  # a blank line between the table and the end marker
    return "\n".join(out)
