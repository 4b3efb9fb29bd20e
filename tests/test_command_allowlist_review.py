"""Attacker's review of commit 762af1a (command rules by allow-list).

A prompt-injected model, a user who once clicked "Always allow" on a harmless command (or
wrote a task profile rule). Each test asserts the SAFE behaviour: the tests of findings fail
on 762af1a and pass once fixed; the tests under "defended" pass now and must keep passing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.rules import Matcher, Rule, RuleBook, RuleDecision
from app.core.tasks import TaskError, parse_allow
from tests.test_command_allowlist import (
    PROJ,
    TOOL,
    allowed,
    always_allow,
    project_world,
    run,
    subject,
    write_rules,
)
from tests.test_shell_tools import sandbox  # noqa: F401 (autouse: a sandbox or a failure)
from tools.shell.danger import never_covered
from tools.shell.parse import parse_line
from tools.spec import Subject


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    return project_world(tmp_path, monkeypatch)



def clicks(*lines: str, folder: Path = PROJ) -> RuleBook:
    """The rules of several "Always allow" clicks, one per line."""
    return RuleBook(None, [r for line in lines for r in always_allow(line, folder).rules()])


def never(line: str, folder: Path = PROJ) -> list[str]:
    return never_covered(parse_line(line), protected=lambda _: None, cwd=folder)


def runs_unasked(book: RuleBook, line: str, folder: Path = PROJ) -> bool:
    """A rule covers the line and nothing makes it never-covered: it runs without asking."""
    return allowed(book, line, folder) and not never(line, folder)


# ================================ findings (fail on 762af1a) ================================


@pytest.mark.parametrize(
    "line",
    [
        "tar tfI docs.tar 'sh -c id'",
        "tar tfI docs.tar 'sh -c \"touch pwned; cat\"'",
        "tar xfI docs.tar 'sh -c id'",
        "tar tvfI docs.tar 'sh -c id'",
    ],
)
def test_old_style_tar_letters_take_their_values_from_the_next_words(line: str):
    """HIGH: in `tar tfI A B` each value letter takes the next word (f=A, I=B: B runs as the
    compressor); the checker reads `fI` as -f with value "I", so `tar` (from "Always allow"
    on `tar -tf docs.tar`, any folder) runs any program."""
    assert not runs_unasked(always_allow("tar -tf docs.tar"), line)


@pytest.mark.parametrize(
    "line",
    [
        "tar -cf out.tar *",
        "touch -- --checkpoint=1 '--checkpoint-action=exec=sh x.sh'; tar -cf out.tar *",
        "tar -tf docs.tar [-]-to-command=id",
        "tar -tf docs.tar ?-to-command=id",
        "rg TODO *",  # a file named --pre=./x.sh; rg is READ_ONLY: covered without a sandbox
    ],
)
def test_a_glob_that_can_expand_to_an_option_is_not_covered(line: str):
    """HIGH: an unquoted glob is taken as an operand, but bash expands it to file names the
    model made (`--checkpoint-action=exec=sh x.sh`, `--pre=./x.sh`): classic wildcard
    injection of options no rule covers."""
    book = clicks("tar -tf docs.tar", "touch notes.txt", "rg TODO src")
    assert not runs_unasked(book, line)


@pytest.mark.parametrize(
    "line",
    [
        "ls() { make; }; cd ../other; ls",
        "true() { make; }; cd /work/other && true",
        "echo() { make; }; cd ../other; echo done",
    ],
)
def test_a_function_body_is_judged_in_every_folder_it_may_be_called_from(line: str):
    """HIGH: a function defined before a `cd` and called after it runs its body in the cd's
    folder, but the body's folder is taken from where it is written: a folder-bound `make`
    runs another folder's Makefile (the function shadows a covered name: ls, true, echo)."""
    book = clicks("cd sub && make", "ls -la", "true", "echo hi")
    assert allowed(book, "cd sub && make")
    assert not runs_unasked(book, line)


@pytest.mark.parametrize(
    "line",
    [
        "case ${CDPATH:=/work/other} in *) ;; esac; cd sub && make",
        "case x in ${CDPATH:=/work/other}) ;; esac; cd sub && make",
        "cat <<< ${CDPATH:=/work/other}; cd sub && make",
        "cat < ${CDPATH:=/work/other}; cd sub && make",
        "cat <<EOF\n${CDPATH:=/work/other}\nEOF\ncd sub && make",
        "bash -a -c 'case ${TAR_OPTIONS:=--to-command=id} in *) ;; esac; tar -tf docs.tar'",
    ],
)
def test_a_variable_assigned_by_an_expansion_is_a_variable_the_line_sets(line: str):
    """HIGH: `${CDPATH:=…}` in a case word, here-string, here-document or redirect target
    sets CDPATH in the line's shell (not caught by ParsedLine.sets); the covered `cd sub`
    then goes to /work/other/sub and the folder-bound `make` runs there; under `bash -a`
    the variable (TAR_OPTIONS) is even exported to the covered tar (checked: it ran)."""
    book = clicks("cd sub && make", "cat notes.txt", "tar -tf docs.tar")
    assert not runs_unasked(book, line)


@pytest.mark.parametrize(
    "line",
    [
        r"bash -k -c 'tar -tf docs.tar TAR_OPTIONS=--to-command=id'",
        r"bash -o keyword -c 'tar -tf docs.tar TAR_OPTIONS=--to-command=id'",
        r"bash -ek -c 'tar -tf docs.tar TAR_OPTIONS=--to-command=id'",
    ],
)
def test_a_nested_shell_with_the_keyword_option_hands_operand_assignments_on(line: str):
    """HIGH: under `bash -k` (`-o keyword`) every `NAME=value` word, even after the program
    name, goes into the program's environment; the unwrapped `tar … TAR_OPTIONS=…` is taken
    as tar with an operand, covered by `tar` (checked: it ran the checkpoint action)."""
    assert not runs_unasked(always_allow("tar -tf docs.tar"), line)


@pytest.mark.parametrize(
    "line",
    [
        "cd ~+/../other && make",
        "cd ~- && make",
        "pytest ~+/../other/test_x.py",
        "python3 build.py ~+/../other/x",
    ],
)
def test_tilde_plus_and_tilde_minus_are_resolved_as_bash_does(line: str):
    """HIGH: bash expands `~+` to $PWD and `~-` to $OLDPWD; os.path.expanduser leaves them
    literal, so `~+/../other` is judged as /work/proj/other while it is /work/other."""
    book = clicks("cd sub && make", "pytest tests", "python3 build.py x")
    assert not runs_unasked(book, line)


@pytest.mark.parametrize(
    "line",
    [
        "ln -s ../other sub; cd sub && make",
        "ln -s /work/other t; pytest t/test_x.py",
        "git checkout evil && cd linkdir && make",
        "tar -xf evil.tar && cd linkdir && make",
    ],
)
def test_a_symlink_made_earlier_in_the_same_line_is_not_trusted(line: str):
    """MEDIUM: folders are resolved with realpath before the line runs; a symlink the line
    itself creates first (ln, a checkout or archive holding one) sends the covered cd or
    path operand to another folder."""
    book = clicks(
        "cd sub && make", "ln -s a b", "pytest tests", "git checkout main", "tar -xf a.tar"
    )
    assert not runs_unasked(book, line)


@pytest.mark.parametrize(
    "line",
    [
        "make -j --eval='$(shell id)'",
        "make -O --eval='$(shell id)'",
        "make -j --eval='include ../other/Makefile'",
    ],
)
def test_make_options_with_an_optional_value_do_not_swallow_the_next_word(line: str):
    """MEDIUM: make's -j and -O take an optional ATTACHED value; the catalogue lists them as
    taking the next word, so any option after them (`--eval`, make code not in any file)
    is covered by the folder rule `make`."""
    book = clicks("cd sub && make")
    assert not runs_unasked(book, line)


@pytest.mark.parametrize(
    "line",
    [
        "make MAKEFILES=/work/other/evil.mk",
        "make 'MAKEFLAGS=--eval=$(shell id)'",
    ],
)
def test_make_variable_operands_that_load_make_code_are_not_inert(line: str):
    """MEDIUM: `VAR=value` operands are taken as inert operands, but MAKEFILES reads make
    code from another folder and MAKEFLAGS=--eval runs make code given on the line."""
    book = clicks("cd sub && make")
    assert not runs_unasked(book, line)


@pytest.mark.parametrize(
    "line",
    [
        "npm install file:../other",
        "npm install file:/work/other",
        "pytest --cov-report=html:/work/other/cov",
        "git clone file:///work/other/repo copy",
        "git fetch file:///work/other/repo",
    ],
)
def test_a_path_behind_a_scheme_or_prefix_is_checked_against_the_folder(line: str):
    """MEDIUM: _path_operands joins `file:../other` to the folder as a relative name, so a
    path behind a prefix (`file:`, `html:`) escapes the folder check: npm installs (and
    runs the scripts of) a package from another folder."""
    book = clicks("npm install", "pytest tests", "git clone https://e.com/a.git", "git fetch")
    assert not runs_unasked(book, line)


def test_an_attached_short_option_value_is_checked_against_the_folder():
    """LOW: `-F../x` is skipped by _path_operands (a word starting with '-' and no '='):
    `git commit -F` reads a file from outside the folder into a commit."""
    book = clicks("git commit -m wip")
    assert not runs_unasked(book, "git commit -F../../home/me/.ssh/id_ed25519")
    assert not runs_unasked(book, "git commit -F ../../home/me/.ssh/id_ed25519")  # defended


def test_mypy_runs_plugins_from_its_folder_so_its_rule_is_bound_to_that_folder():
    """MEDIUM: mypy loads `plugins =` from mypy.ini in the folder it runs in (Python code the
    model can write), yet its rule is not folder-bound: "Always allow" on `mypy src` covers
    mypy in every folder, and a task profile `command=mypy` needs no folder."""
    book = always_allow("mypy src")
    assert all(r.matcher.folder for r in book.rules())
    assert not allowed(book, "mypy src", Path("/work/other"))
    with pytest.raises(TaskError):
        parse_allow("shell_run,command=mypy")


def test_npm_subcommands_that_read_the_folders_npmrc_are_bound_to_that_folder():
    """MEDIUM: `npm view` is on the package managers' safe list, so its rule is not
    folder-bound; but npm reads the folder's .npmrc (`git=./evil.sh`) and `npm view
    git+file:///…` runs that program (checked: it ran evil.sh) in any folder."""
    book = always_allow("npm view react")
    assert all(r.matcher.folder for r in book.rules())
    assert not allowed(book, "npm view git+file:///work/other/repo", Path("/work/other"))


def test_date_with_an_operand_that_sets_the_clock_is_not_read_only():
    """LOW: `date MMDDhhmm` sets the system clock, yet it counts as READ_ONLY, so a rule for
    `date` covers it with no sandbox (root or CAP_SYS_TIME: the clock changes)."""
    from tools.shell.programs import known_read_only

    assert known_read_only(["date", "+%s"])
    assert not known_read_only(["date", "010100002030"])


@pytest.mark.parametrize(
    "line",
    [
        "git push --force-with-lease",
        "git push --delete origin main",
        "git push --prune origin",
    ],
)
def test_git_push_options_that_overwrite_or_delete_remote_history_are_not_inert(line: str):
    """LOW: a rule for `git push` covers a force push and remote deletions through options
    the catalogue calls inert; a deny rule for `git push --force` does not name
    `--force-with-lease`."""
    deny = Rule(tool=TOOL, matcher=Matcher(kind="command", value="git push --force"),
                decision=RuleDecision.DENY)  # fmt: skip
    book = RuleBook(None, [*always_allow("git push").rules(), deny])
    assert not allowed(book, line)


def test_a_command_given_as_one_string_with_backticks_after_escaped_quotes_is_not_covered():
    """LOW (latent: no tool reports a one-string command today): _all_quoted counts `\\'` as
    a quote, so `ls \\'`id`\\'` passes as quoted; /bin/sh -c runs `id`."""
    command = "ls \\'`touch pwned`\\'"
    assert not Matcher(kind="command", value="ls").matches(Subject(command=command))


# ---- end to end: real bash and bubblewrap, nobody answers ---------------------------------------




def _book(world: dict[str, Path], *lines: str) -> RuleBook:
    return clicks(*lines, folder=world["proj"])


def test_e2e_old_style_tar_letters_run_nothing(llm, world, capsys):
    """HIGH: end to end, "Always allow" on `tar -tf docs.tar`, then `tar tfI …`."""
    write_rules(world["home"], _book(world, "tar -tf docs.tar"))
    result = run(llm, world, capsys, "tar tfI docs.tar 'sh -c \"touch pwned; cat\"'")
    assert not (world["proj"] / "pwned").exists(), result


def test_e2e_bash_keyword_option_does_not_hand_tar_options_on(llm, world, capsys):
    """HIGH: end to end, "Always allow" on `tar -tf docs.tar`, then `bash -k -c 'tar …'`."""
    write_rules(world["home"], _book(world, "tar -tf docs.tar"))
    line = (
        r"bash -k -c 'tar -tf docs.tar "
        r"TAR_OPTIONS=--checkpoint=1\ --checkpoint-action=exec=touch\\\ pwned'"
    )
    result = run(llm, world, capsys, line)
    assert not (world["proj"] / "pwned").exists(), result


def test_e2e_a_glob_does_not_inject_tar_options(llm, world, capsys):
    """HIGH: end to end, files named like options in the folder and `tar -cf out.tar *`."""
    proj = world["proj"]
    (proj / "x.sh").write_text("touch pwned\n")
    (proj / "--checkpoint=1").write_text("")
    (proj / "--checkpoint-action=exec=sh x.sh").write_text("")
    write_rules(world["home"], _book(world, "tar -tf docs.tar"))
    result = run(llm, world, capsys, "tar -cf out.tar *")
    assert not (proj / "pwned").exists(), result


def test_e2e_a_function_called_after_a_cd_does_not_run_make_in_another_folder(llm, world, capsys):
    """HIGH: end to end, "Always allow" on `cd sub && make` and on `ls -la`."""
    write_rules(world["home"], _book(world, "cd sub && make", "ls -la"))
    result = run(llm, world, capsys, "ls() { make; }; cd ../other; ls")
    assert not (world["other"] / "pwned").exists(), result


def test_e2e_cdpath_set_by_an_expansion_does_not_move_cd(llm, world, capsys):
    """HIGH: end to end, "Always allow" on `cd sub && make`, then CDPATH set by `${…:=}`."""
    sub = world["other"] / "sub"
    sub.mkdir()
    (sub / "Makefile").write_text("all:\n\t@touch pwned\n")
    (world["proj"] / "sub").mkdir()
    (world["proj"] / "sub" / "Makefile").write_text("all:\n\t@echo fine\n")
    write_rules(world["home"], _book(world, "cd sub && make"))
    line = f"case ${{CDPATH:={world['other']}}} in *) ;; esac; cd sub && make"
    result = run(llm, world, capsys, line)
    assert not (sub / "pwned").exists(), result


def test_e2e_tilde_plus_does_not_walk_cd_out_of_the_folder(llm, world, capsys):
    """HIGH: end to end, "Always allow" on `cd sub && make`, then `cd ~+/../other`."""
    write_rules(world["home"], _book(world, "cd sub && make"))
    result = run(llm, world, capsys, "cd ~+/../other && make")
    assert not (world["other"] / "pwned").exists(), result


def test_e2e_a_symlink_made_in_the_line_does_not_walk_cd_out(llm, world, capsys):
    """MEDIUM: end to end, "Always allow" on `ln -s a b` and on `cd sub && make`."""
    write_rules(world["home"], _book(world, "cd sub && make", "ln -s a b"))
    result = run(llm, world, capsys, "ln -s ../other sub; cd sub && make")
    assert not (world["other"] / "pwned").exists(), result


# ================================ defended (pass on 762af1a) ================================


@pytest.mark.parametrize(
    "line",
    [
        "tar -tf docs.tar {--to-command=id,}",
        "TAR_OPTIONS=--to-command=id tar -tf docs.tar",
        "case x in *) export TAR_OPTIONS=x;; esac; tar -tf docs.tar",
        "f() { local -x TAR_OPTIONS=x; tar -tf docs.tar; }; f",
    ],
)
def test_defended_tar_brace_and_variables(line: str):
    """Defended: brace expansion is dynamic, variables set for tar ask."""
    assert not runs_unasked(always_allow("tar -tf docs.tar"), line)


@pytest.mark.parametrize(
    "line",
    [
        "cd {../other,} && make",
        "builtin cd ../other && make",
        "command cd ../other && make",
        "if cd ../other; then make; fi",
        "f() { cd ../other; }; f; make",
        "env -C ../other make",
        "echo -C ../other | xargs make",
        "make -j -C../other",
        "make -j --directory=../other",
        "trap make EXIT; cd ../other",
        "eval 'cd ../other' && make",
        "bash -O cdable_vars -c 'cd HOME && make'",
        "shopt -s cdable_vars; cd HOME && make",
        "cd() { builtin cd ../other; }; cd sub && make",
        "pushd -n ../other; make",
        "cd sub ../other && make",
        "CDPATH=/work/other; cd sub && make",
        "bash --posix -c 'TAR_OPTIONS=x : ; make'",
    ],
)
def test_defended_ways_out_of_the_folder(line: str):
    """Defended: cd in nested constructs, wrappers that change folder, eval and trap."""
    book = clicks("cd sub && make", "echo hi", "true")
    assert not runs_unasked(book, line)


@pytest.mark.parametrize(
    "line",
    [
        "git -c core.fsmonitor='touch pwned' status",
        "git --config-env=core.fsmonitor=HOME status",
        "git -C ../other status",
        "git status --porcelain=v1 --zzz",
    ],
)
def test_defended_git_global_options(line: str):
    """Defended: git's own -c / --config-env make the line a problem, -C points elsewhere."""
    assert not runs_unasked(always_allow("git status"), line)


@pytest.mark.parametrize(
    "line",
    [
        "git diff -U --ext-diff",  # -U swallows the next word, but --ext-diff is a problem
        "git diff -U --output=/tmp/x",  # and --output a write
        "git log -p --textconv",
        "git diff --no-index /etc/passwd f.txt",
        "git log -- ../other",
    ],
)
def test_defended_git_diff_options_caught_by_other_layers(line: str):
    """Defended: git options that run programs, write or read elsewhere still ask."""
    assert not runs_unasked(clicks("git diff", "git log"), line)


@pytest.mark.parametrize(
    "line",
    [
        "command git push",
        "bash -c 'git push'",
        "git --no-pager push",
        "g''it pu\\sh",
        "echo x | xargs git push",
        "cd .. && git push -f",
    ],
)
def test_defended_deny_rule_still_names_the_command(line: str):
    """Defended: a deny rule for `git push` matches through wrappers and quoting."""
    deny = Rule(tool=TOOL, matcher=Matcher(kind="command", value="git push"),
                decision=RuleDecision.DENY)  # fmt: skip
    book = RuleBook(None, [deny, *always_allow("git push").rules()])
    assert book.evaluate(TOOL, "builtin", subject(line)).decision is RuleDecision.DENY


@pytest.mark.parametrize(
    "line",
    [
        "python3 -m pytest -p evil",
        "python3 -m pytest --rootdir=/elsewhere",
        "pytest -c /elsewhere/pytest.ini",
        "pytest -vp evil",
        "pytest -- -p evil",
    ],
)
def test_defended_pytest_loading_code_from_elsewhere(line: str):
    """Defended: pytest options that load plugins or config are off the list (or after --)."""
    book = clicks("pytest tests", "python3 -m pytest")
    assert not runs_unasked(book, line)


@pytest.mark.parametrize(
    "text",
    [
        "shell_run,command=python3",
        "shell_run,command=make test",
        "shell_run,command=sed",
        "shell_run,command=env make test,folder=/work/proj",
    ],
)
def test_defended_task_profiles(text: str):
    """Defended: a profile must bind model code to a folder and name interpreters' scripts."""
    with pytest.raises(TaskError):
        parse_allow(text)


def test_helpers_agree_with_the_reviewed_tests():
    """The copied helpers make the rules the reviewed tests expect."""
    assert [r.matcher.value for r in always_allow("tar -tf docs.tar").rules()] == ["tar"]
    book = clicks("cd sub && make")
    assert allowed(book, "cd sub && make") and not allowed(book, "cd ../other && make")
