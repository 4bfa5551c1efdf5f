#!/usr/bin/env python3
"""lab_sheets — run every command of every lab sheet and check the columns the sheet names.

    python3 t/lib/lab_sheets.py [--list] [SHEET.md ...]     (default: benchmarks/labs/*.md)

A lab sheet promises a student that its commands run and that the output has the columns it
explains. The conventions that make that promise testable (benchmarks/labs/README.md):

  - every ```sh block holds commands a student types from the repository root, one per line,
    `#` starting a comment; every one of them is run here (other blocks are not commands);
  - `<!-- lab-test quick PROGRAM: ARGS -->` gives option/value pairs that shrink PROGRAM's runs
    for the test: each replaces the value the command gives that option, or is added when the
    command does not give it (the student runs the sheet's sizes; the test a quick size);
  - `<!-- lab-test quick PROGRAM+WORD: ARGS -->` adds pairs for PROGRAM's commands that hold
    WORD (after PROGRAM's own): a mode that needs smaller sizes than the sheet's other commands;
  - `<!-- lab-test as-written: WORD ... -->`: a command holding one of these words runs as
    written, without the quick pairs (a mode that takes no size options, e.g. `--analytic`);
  - a table whose header's first cell is `column` lists, in backticks in its first cells, the
    columns the sheet explains: each must appear in the output of the sheet's commands (a word
    of the terminal output, or a key of a results row, its metrics or params).

Output is TAP: one test per command (exit status 0) and one per sheet for its columns. A
command that selects the CUDA backend is skipped where no CUDA device is visible, and one that
runs the simulator (scripts/simulate, scripts/scaling-study) where make SIMGRID=1 has not built
the simulated programs.
Standard library only.
"""
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
QUICK_RE = re.compile(r"<!--\s*lab-test\s+quick\s+(\S+?)\s*:\s*(.*?)\s*-->")
AS_WRITTEN_RE = re.compile(r"<!--\s*lab-test\s+as-written\s*:\s*(.*?)\s*-->")
TIMEOUT_S = 300


def parse_sheet(path):
    """(commands, quick, as_written, columns) of one sheet; commands are (line number, text,
    tag): the tag is what follows `sh` on the block's opening line ("" for none; the README and
    docs/ mark blocks that cannot run here: t/lib/doc_commands.py)."""
    commands, quick, as_written, columns = [], {}, set(), []
    in_sh = in_block = False
    tag = ""
    table_is_columns = False
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            if in_block:
                in_block = in_sh = False
            else:
                in_block = True
                info = stripped[3:].split()
                in_sh = info[:1] == ["sh"]
                tag = " ".join(info[1:])
            continue
        if in_block:
            if in_sh:
                text = strip_comment(stripped)
                if text:
                    commands.append((no, text, tag))
            continue
        for program, args in QUICK_RE.findall(line):
            quick[program] = shlex.split(args)
        for words in AS_WRITTEN_RE.findall(line):
            as_written |= set(words.split())
        if stripped.startswith("|"):
            cells = [c.strip() for c in stripped.strip("|").split("|")]
            if cells and cells[0] == "column":
                table_is_columns = True
            elif table_is_columns and not set(cells[0]) <= set("-: "):
                columns += re.findall(r"`([^`]+)`", cells[0])
        else:
            table_is_columns = False
    return commands, quick, as_written, columns


def strip_comment(text):
    """A command without its trailing `# comment` (a # inside quotes stays)."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=False)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        return shlex.join(list(lexer))
    except ValueError:
        return text


def has_gpu():
    """A CUDA device is visible (the driver's control node and nvidia-smi answering)."""
    smi = shutil.which("nvidia-smi")
    return os.path.exists("/dev/nvidiactl") and smi is not None and \
        subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def wants_gpu(words):
    """The command selects the CUDA backend (-B cuda, --backend cuda, --backend=cuda)."""
    return any((w in ("-B", "--backend") and i + 1 < len(words) and words[i + 1] == "cuda")
               or w in ("--backend=cuda", "-Bcuda") for i, w in enumerate(words))


SIMULATORS = ("scripts/simulate", "scripts/scaling-study")  # they run the SMPI build


def program_of(words):
    """The program a command runs: bin/NAME, possibly behind scripts/sl-launch, one of the
    simulation scripts or run_all.sh (named by their basename, for the quick markers)."""
    for w in words:
        if w.startswith("bin/") or w in SIMULATORS or os.path.basename(w) == "run_all.sh":
            return os.path.basename(w)
    return None


def has_smpi_build():
    """make SIMGRID=1 has built the simulated programs (build/smpi/bin)."""
    d = os.path.join(TOP, "build", "smpi", "bin")
    return os.path.isdir(d) and bool(os.listdir(d))


def apply_quick(words, pairs):
    """Each OPTION VALUE pair of `pairs` replaces the command's value for OPTION, or is added."""
    words = list(words)
    for i in range(0, len(pairs) - 1, 2):
        opt, val = pairs[i], pairs[i + 1]
        for j, w in enumerate(words):
            if w == opt and j + 1 < len(words):
                words[j + 1] = val
                break
            if w.startswith(opt + "="):
                words[j] = opt + "=" + val
                break
        else:
            words += [opt, val]
    return words


def output_words(text, outdir):
    """Every word of the terminal output and every key of the results rows written to outdir."""
    words = set(re.findall(r"[A-Za-z_][\w/%.+-]*", text))
    words |= set(text.split())
    for path in glob.glob(os.path.join(outdir, "*.jsonl")):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(row, dict):
                    continue
                words |= set(row)
                for part in ("metrics", "params", "check"):
                    if isinstance(row.get(part), dict):
                        words |= set(row[part])
    return words


def prepare(cmd, quick, as_written, gpu, smpi):
    """(words, why not): the command as the test runs it (the quick pairs of its program
    applied, unless it is run as written), and why it is skipped here, or None."""
    words = shlex.split(cmd)
    prog = program_of(words)
    if prog in quick and not as_written & set(words):
        words = apply_quick(words, quick[prog])
    for key, pairs in quick.items():  # PROGRAM+WORD: more pairs for PROGRAM's commands holding WORD
        p, _, word = key.partition("+")
        if word and p == prog and word in words and not as_written & set(words):
            words = apply_quick(words, pairs)
    if wants_gpu(words) and not gpu:
        return words, "no CUDA device visible"
    if any(w in SIMULATORS for w in words) and not smpi:
        return words, "no SMPI build (make SIMGRID=1)"
    return words, None


def run_command(words, cwd, env, timeout=TIMEOUT_S):
    """(exit status, or "timeout" / "not started"; its output)."""
    try:
        p = subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True,
                           errors="replace", timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        return "timeout", str(e.stdout or "")
    except OSError as e:
        return "not started", str(e)


def main(argv):
    sheets = argv or sorted(glob.glob(os.path.join(TOP, "benchmarks", "labs", "*.md")))
    sheets = [s for s in sheets if os.path.basename(s) != "README.md"]
    if "--list" in argv:
        for s in sorted(glob.glob(os.path.join(TOP, "benchmarks", "labs", "*.md"))):
            for no, cmd, _ in parse_sheet(s)[0]:
                print(f"{os.path.relpath(s, TOP)}:{no}: {cmd}")
        return 0
    n = failed = 0

    gpu = has_gpu()
    smpi = has_smpi_build()

    def ok(cond, desc, detail=""):
        nonlocal n, failed
        n += 1
        print(("ok" if cond else "not ok") + f" {n} - {desc}")
        if not cond:
            failed += 1
            for line in detail.splitlines()[-15:]:
                print("#   " + line)
        sys.stdout.flush()

    for sheet in sheets:
        name = os.path.relpath(sheet, TOP)
        commands, quick, as_written, columns = parse_sheet(sheet)
        ok(len(commands) > 0, f"{name}: has commands in ```sh blocks")
        seen, texts = set(), []
        for no, cmd, _ in commands:
            words, skip = prepare(cmd, quick, as_written, gpu, smpi)
            if skip:
                n += 1
                print(f"ok {n} - {name}:{no}: {shlex.join(words)} # SKIP {skip}")
                continue
            with tempfile.TemporaryDirectory(prefix="scalelab-lab.") as outdir:
                rc, text = run_command(words, TOP, dict(os.environ, SL_RESULTS=outdir))
                seen |= output_words(text, outdir)
                texts.append(text)
            ok(rc == 0, f"{name}:{no}: {shlex.join(words)}", f"exit {rc}\n{text}")
        alltext = "\n".join(texts)  # a name of several words ("L2 err") is looked for as written
        missing = [c for c in columns if c not in seen and
                   not re.search(r"(?<!\w)" + re.escape(c) + r"(?!\w)", alltext)]
        ok(columns and not missing, f"{name}: the {len(columns)} columns the sheet explains are in the output",
           "missing: " + ", ".join(missing) if columns else "no `| column |` table explains the output")
    print(f"1..{n}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
