"""cli — what the scripts in scripts/ do with a bad argument, a bad input or a failure: one line
on stderr and the exit status the suite promises (2: usage error or bad input, 3: runtime
failure), never a traceback. A traceback exits 1, which scripts/compare reserves for a
regression and scripts/report for a failed run: an input the script could not read must not pass
for either.
"""
import os
import sys
import traceback


class UsageError(Exception):
    """A bad argument or an input file that cannot be read as what it should be: one line
    naming it and what is accepted; exit 2."""


class Failure(Exception):
    """A runtime failure (a file that cannot be written, a tool that failed): one line naming
    the cause; exit 3."""


def _bounds(lo, hi, lo_open, hi_open):
    if lo is not None and hi is not None:
        return f" in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    if lo is not None:
        return f" {'>' if lo_open else '>='} {lo:g}"
    if hi is not None:
        return f" {'<' if hi_open else '<='} {hi:g}"
    return ""


def number(opt, value, lo=None, hi=None, lo_open=False, hi_open=False, integer=False, what=None):
    """value (the option's text, or a number argparse already made of it) as a finite number, or
    an integer, within the bounds; else UsageError naming opt and what it accepts. float()
    accepts 'nan' and 'inf', which no bound excludes by comparison (nan < 0 is false): they are
    refused here by name."""
    kind = what or ("an integer" if integer else "a finite number")
    expected = f"{opt}: expected {kind}{_bounds(lo, hi, lo_open, hi_open)}, got '{value}'"
    try:
        if integer:
            v = value if isinstance(value, int) and not isinstance(value, bool) else int(str(value).strip(), 10)
        else:
            v = float(value)
    except (TypeError, ValueError):
        raise UsageError(expected) from None
    if v != v or v in (float("inf"), float("-inf")):
        raise UsageError(expected)
    if lo is not None and (v < lo or (lo_open and v == lo)):
        raise UsageError(expected)
    if hi is not None and (v > hi or (hi_open and v == hi)):
        raise UsageError(expected)
    return v


def where(e):
    """file:line of the innermost frame of an exception, for an internal error's one line."""
    tb = traceback.extract_tb(e.__traceback__)
    return f"{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else "?"


def run_main(prog, fn, *args):
    """fn(*args)'s exit status, with every way it can fail turned into one line on stderr:
    UsageError 2, Failure 3, an OSError 3 naming its file, and anything else (a defect of the
    script) 3 with where it happened."""
    try:
        return fn(*args)
    except UsageError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    except Failure as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 3
    except OSError as e:
        name = f"{e.filename}: " if e.filename else ""
        print(f"{prog}: {name}{e.strerror or e}", file=sys.stderr)
        return 3
    except Exception as e:  # noqa: BLE001 — a defect: still one line, and not exit 1
        print(f"{prog}: internal error: {e.__class__.__name__}: {e} (at {where(e)})", file=sys.stderr)
        return 3
