"""lit's ShTest, with the RUN lines' `tilemma`, `tilemma-opt` and `filecheck` run inside lit's
worker processes rather than each in a process of its own.

Why: most of the suite's time was Python start-up; each of its ~300 tool commands paid 0.15-0.65 s
of imports before any work. Here a worker imports each tool once and runs a command through its
console script's entry point (tests.inprocess.run_bytes: argv, stdin/stdout/stderr as a pipe's,
exit status) with the command's environment and working directory.

All else is lit's own: parsing, substitutions (%if, %s, %t ...), the script, the log. During a
test only its internal shell's `executeShCmd` is swapped for `_execute_sh_cmd`, which runs a
pipeline holding one of the tools here: its commands one after another, bytes passed along, the
others as processes as lit starts them; `not` and `!` count as lit's do. Pipelines without a tool,
and a whole test that uses what this does not model (a timeout, `env`, `not --crash`, `ulimit`,
`umask`, `&`, a lit builtin in a pipeline), go to lit's shell. A command runs here only when it
resolves (PATH) to the script lit.cfg names and has no flag that changes the process for good."""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import os
import signal
import subprocess
import sys
import traceback
import warnings

import lit.formats
import lit.TestRunner
import lit.util
from lit.ShCommands import Seq
from lit.ShellEnvironment import (InternalShellError, ShellCommandResult, expand_glob,
                                  expand_glob_expressions, processRedirects)

from tests.inprocess import run_bytes

PIPE, STDOUT = subprocess.PIPE, subprocess.STDOUT
#: Commands lit's shell runs itself and refuses in a pipeline (`echo` there is /bin/echo).
LIT_BUILTINS = {"cd", "export", "mkdir", "popd", "pushd", "rm", "ulimit", "umask", ":", "@echo"}
#: Commands whose effect on a command's environment or limits `_Shell` does not model.
UNMODELLED = {"env", "ulimit", "umask"}
#: tilemma-opt (xDSL) flags that patch a class for the rest of the process.
PROCESS_WIDE = ("--disable-verify", "--syntax-highlight")
LIT_DIR = os.path.dirname(os.path.abspath(lit.TestRunner.__file__))


class InProcessShTest(lit.formats.ShTest):
    """lit's ShTest (internal shell) that runs `tools` ({name: the script a RUN line runs}) in
    its worker processes, those whose console script this Python has."""

    def __init__(self, tools: dict[str, str | None]):
        super().__init__(execute_external=False)
        self.tools = {os.path.realpath(path): name for name, path in tools.items()
                      if path and _entry_point(name) is not None}

    def execute(self, test, lit_config):
        lit_execute = lit.TestRunner.executeShCmd
        lit.TestRunner.executeShCmd = functools.partial(_execute_sh_cmd, self.tools, lit_execute)
        try:  # a worker runs one test at a time
            return super().execute(test, lit_config)
        finally:
            lit.TestRunner.executeShCmd = lit_execute


def _execute_sh_cmd(tools, lit_execute, cmd, shenv, results, timeout=0):
    """lit's `executeShCmd(cmd, ...)`, `cmd` being a test's whole script."""
    if timeout or not _modelled(cmd):
        return lit_execute(cmd, shenv, results, timeout)
    try:
        status = _Shell(tools, shenv, results).run(cmd)
    except InternalShellError as e:
        status = 127
        results.append(ShellCommandResult(e.command, "", e.message, status, False))
    return status, None


def _modelled(cmd) -> bool:
    """Whether `_Shell` runs `cmd` as lit's shell would."""
    if isinstance(cmd, Seq):
        return cmd.op in (";", "&&", "||") and _modelled(cmd.lhs) and _modelled(cmd.rhs)
    names = []
    for command in cmd.commands:
        args = list(command.args)
        while args and args[0] in ("not", "!"):
            if args[:2] == ["not", "--crash"]:
                return False
            args.pop(0)
        names.append(args[0] if args and isinstance(args[0], str) else None)
    return not UNMODELLED.intersection(names) and (
        len(names) == 1 or not LIT_BUILTINS.intersection(names))


class _Shell:
    """lit's internal shell for a test's commands, running `tools` here."""

    def __init__(self, tools: dict[str, str], shenv, results: list):
        self.tools, self.shenv, self.results = tools, shenv, results

    def run(self, cmd) -> int:
        if isinstance(cmd, Seq):  # as lit's shell
            status = self.run(cmd.lhs)
            if cmd.op == ";" or (cmd.op == "&&") == (status == 0):
                status = self.run(cmd.rhs)
            return status
        if not any(self._tool(command.args) for command in cmd.commands):
            no_timeout = lit.TestRunner.TimeoutHelper(0)
            return lit.TestRunner._executeShCmd(cmd, self.shenv, self.results, no_timeout)
        return self._pipeline(cmd)

    def _which(self, name: str) -> str | None:
        if name.startswith("."):
            local = os.path.join(self.shenv.cwd, name)
            if os.path.isfile(local):
                return local
        return lit.util.which(name, self.shenv.env["PATH"])

    def _tool(self, args) -> str | None:
        """The tool `args` (after `not`s) runs here, if any."""
        args = list(args)
        while args and args[0] in ("not", "!"):
            args.pop(0)
        if not args or not isinstance(args[0], str):
            return None
        path = self._which(args[0])
        name = path and self.tools.get(os.path.realpath(path))
        if name == "tilemma-opt" and any(isinstance(a, str) and len(a) > 2 and f.startswith(a)
                                         for a in args[1:] for f in PROCESS_WIDE):
            return None  # an abbreviation too, as argparse takes it
        return name

    def _pipeline(self, pipeline) -> int:
        cwd = self.shenv.cwd
        data, opened, done = b"", [], []  # a command's stdin; lit's opened files; (command, status, out, err)
        for i, command in enumerate(pipeline.commands):
            last = i == len(pipeline.commands) - 1
            args = lit.TestRunner._expandLateSubstitutions(
                command, list(command.args), cwd, self.shenv.normalize_slashes)
            nots = []
            while args and args[0] in ("not", "!"):
                nots.append(args.pop(0))
            if not args:
                raise InternalShellError(command, f"Error: '{nots[-1]}' requires a subcommand")
            args[0] = expand_glob(args[0], cwd)[0]
            args = expand_glob_expressions(args, cwd)
            stdin, stdout, stderr = processRedirects(command, PIPE, self.shenv, opened)
            to_pipe = stdout == PIPE
            err_to_pipe = stderr == STDOUT and not to_pipe  # lit: `2>&1 >f` sends stderr down the pipe
            merge = (stderr == STDOUT and to_pipe) or (stderr is stdout and not isinstance(stdout, int))
            data = data if stdin == PIPE else stdin.buffer.read()
            tool = self._tool(args)
            status, out, err = (self._in_process(tool, args, data, merge) if tool
                                else self._process(command, args, data, merge))
            if len(nots) % 2:  # as lit's `not` (a crash fails it) and `!`
                status = int(status <= 0) if nots == ["not"] else int(status == 0)
            elif nots:
                status = int(status != 0)
            for stream, output in ((stdout, out), (stderr, err)):  # under 2>&1 err is empty
                if not isinstance(stream, int):
                    stream.buffer.write(output)
                    stream.flush()
            data = out if to_pipe else err if err_to_pipe else b""
            done.append((command, status, out if to_pipe and last else b"",
                         err if stderr == PIPE or (err_to_pipe and last) else b""))
        for _name, _mode, f, _path in opened:
            f.close()
        exit_status = None
        for command, status, out, err in done:
            files = [] if status == 0 else _written(opened)
            self.results.append(ShellCommandResult(command, _text(out), _text(err), status, False, files))
            if not pipeline.pipe_err or not exit_status or status != 0:
                exit_status = status
        return int(not exit_status) if pipeline.negate else exit_status

    def _in_process(self, tool: str, args: list[str], stdin: bytes, merge: bool):
        env = self.shenv.env
        with _process_state(env, self.shenv.cwd):
            proc = run_bytes(self._which(args[0]), _as_script(_entry_point(tool)), args[1:], stdin,
                             merge_stderr=merge, unbuffered=bool(env.get("PYTHONUNBUFFERED")))
        return proc.returncode, proc.stdout, proc.stderr

    def _process(self, command, args: list[str], stdin: bytes, merge: bool):
        if args[0] in ("cat", "diff"):  # as lit: its own Python versions of these
            args = [sys.executable, os.path.join(LIT_DIR, "builtin_commands", args[0] + ".py"), *args[1:]]
            self.shenv.env["PYTHONPATH"] = LIT_DIR
        executable = self._which(args[0])
        if executable is None:
            raise InternalShellError(command, f"{args[0]!r}: command not found")
        proc = subprocess.run(args, executable=executable, input=stdin, stdout=PIPE,
                              stderr=STDOUT if merge else PIPE, cwd=self.shenv.cwd, env=self.shenv.env)
        if proc.returncode == -signal.SIGINT:
            raise KeyboardInterrupt
        return proc.returncode, proc.stdout, proc.stderr or b""


@functools.cache
def _entry_point(name: str):
    """The function console script `name` calls, or None; loaded (imported) on first use."""
    found = importlib.metadata.entry_points(group="console_scripts", name=name)
    return next(iter(found), None)


def _as_script(entry_point):
    """The entry point run as its console script runs it, `sys.exit(main())`: an uncaught
    exception is a traceback on stderr and status 1."""
    def script(_args):
        try:  # imported on the first run, as a process does: its streams are a pipe's
            return entry_point.load()()
        except Exception:
            traceback.print_exc()
            return 1
    return script


@contextlib.contextmanager
def _process_state(env: dict[str, str], cwd: str):
    """The command's environment and working directory, and warnings as a fresh process shows
    them; this process's back after."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        with warnings.catch_warnings():
            yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def _written(opened) -> list:
    """Files a failed command wrote (lit shows them)."""
    files = []
    for name, mode, _f, path in sorted(opened, key=lambda o: o[0]):
        if path is not None and mode in ("w", "a"):
            with contextlib.suppress(OSError), open(path, "rb") as f:
                files.append((name, path, f.read()))
    return files


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace").replace("\r\n", "\n")
