"""files — reading (and writing) a results directory's files (results/schema.md) for the scripts
without a traceback on any input: what cannot be read as the format says is a UsageError (one
line naming the file, exit 2); a line that is not a results row is left to the caller (compare
refuses the file, report names the line and goes on).

  read_file      a regular file's bytes (a directory, a FIFO or a device is refused, never waited on)
  json_lines     (line number, parsed object or None, why not) for each non-blank line
  load_manifest  manifest.json, checked against results/schema.json (schema.py)
  load_status    run_all.sh's status.tsv: {program: (exit, seconds)} and one note per bad line
  write_file     what scripts write into a results directory, never through a planted link
  open_log       a log file for a child's output, the same way
Schema versions this reader knows: VERSIONS; a row or manifest of another is refused, since a
version changes whenever a field changes meaning.
"""
import errno
import json
import os
import re
import stat

from .cli import Failure, UsageError
from .schema import SCHEMA_NAME, manifest_error

VERSIONS = (1, 2)
DIGITS = re.compile(r"[0-9]+")  # str.isdigit() takes "²", which int() refuses


def read_file(path):
    """The bytes of the regular file at path. Opened without blocking so that a FIFO planted
    where a results file should be is refused, not waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise UsageError(f"{path}: cannot read: {kind}, expected a file")
        chunks = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks)
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror}") from None
    finally:
        os.close(fd)


def version_error(v):
    """Why a schema_version is not one this reader knows, or None."""
    if isinstance(v, int) and not isinstance(v, bool) and v in VERSIONS:
        return None
    return (f"schema_version {json.dumps(v)}: this reader knows versions "
            f"{' and '.join(map(str, VERSIONS))} (results/schema.md)")


def json_lines(path):
    """(n, obj, None) for each line of path that is JSON, (n, None, why) for one that is not
    UTF-8 or not JSON. A JSON object of an unknown schema_version refuses the whole file."""
    for n, raw in enumerate(read_file(path).split(b"\n"), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            yield n, None, f"not UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1})"
            continue
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as e:  # ValueError: JSONDecodeError, an int of 5000 digits
            yield n, None, f"not valid JSON ({e})"
            continue
        if isinstance(obj, dict) and "schema_version" in obj and version_error(obj["schema_version"]):
            raise UsageError(f"{path}:{n}: {version_error(obj['schema_version'])}")
        yield n, obj, None


def load_manifest(path):
    """manifest.json as a dict; UsageError naming the file when it cannot be read, is of an unknown
    schema_version or is not valid against results/schema.json (naming the field)."""
    try:
        m = json.loads(read_file(path).decode("utf-8"))
    except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise UsageError(f"{path}: not a readable JSON manifest ({e})") from None
    if isinstance(m, dict) and m.get("schema_version") is not None and version_error(m["schema_version"]):
        raise UsageError(f"{path}: {version_error(m['schema_version'])}")
    why = manifest_error(m)
    if why:
        raise UsageError(f"{path}: not a manifest ({SCHEMA_NAME}): {why}")
    return m


def load_status(path):
    """run_all.sh's status.tsv as {program: (exit, seconds)}, and one note (file:line) per line
    that is not program<TAB>exit<TAB>seconds."""
    status, errors = {}, []
    for n, raw in enumerate(read_file(path).split(b"\n")[1:], 2):
        if not raw.strip():
            continue
        parts = raw.decode("utf-8", "replace").split("\t")
        if len(parts) != 3 or not parts[0] or not DIGITS.fullmatch(parts[1]) or not DIGITS.fullmatch(parts[2]):
            errors.append(f"{path}:{n}: malformed (expected program<TAB>exit<TAB>seconds)")
            continue
        status[parts[0]] = (int(parts[1]), int(parts[2]))
    return status, errors


def _create(path, exclusive):
    """A descriptor of path opened for writing (O_EXCL when exclusive, else truncated), never
    through a symbolic link planted there (O_NOFOLLOW) nor into a FIFO or device (O_NONBLOCK,
    then fstat: a FIFO with no reader would block forever). None when exclusive and path
    exists as a regular file (the caller decides). UsageError for a link or a file that is not
    regular, Failure for anything else."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | (os.O_EXCL if exclusive else os.O_TRUNC), 0o664)
    except OSError as e:
        if os.path.islink(path):
            raise UsageError(f"{path} is a symbolic link: refusing to write through it; "
                             "choose a new directory") from None
        if exclusive and e.errno == errno.EEXIST and os.path.isfile(path):
            return None
        if os.path.lexists(path) and not os.path.isfile(path):
            raise UsageError(f"{path} is not a regular file: refusing to write it; choose a new directory") from None
        raise Failure(f"cannot write {path}: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"{path} is not a regular file: refusing to write it; choose a new directory")
    return fd


def write_file(path, text, exclusive=False):
    """Writes text to path through _create. exclusive: never over an existing file, except one
    that already holds exactly this text (the same run writing the same file again): refused,
    exit 2. A write that fails is a Failure naming the file (exit 3)."""
    data = text.encode("utf-8")
    fd = _create(path, exclusive)
    if fd is None:
        if read_file(path) == data:
            return
        raise UsageError(f"{path} already exists and holds something else: refusing to overwrite it; "
                         "choose a new directory")
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as e:
        os.close(fd)
        os.unlink(path)  # a cut file would pass for a whole one
        raise Failure(f"cannot write {path}: {e.strerror}") from None
    os.close(fd)


def open_log(path):
    """path opened for writing (truncated) through _create, as a file object for a child's
    output."""
    return os.fdopen(_create(path, False), "w")
