"""Command rules by allow-list, attacked the way a prompt-injected model would.

Each class of the attacker's review is tried with more than its one example: a rule the
user made once ("Always allow" on a harmless command) must never cover a command that runs
something else — through a variable set in front or earlier in the line, an option getopt
takes anywhere, a program that runs other programs, a `cd` to another folder, a path operand
outside the rule's folder, or a program Deskhand does not know. The end-to-end cases run the
real `deskhand ask` path with real bash and bubblewrap; nobody answers, so whatever would
ask is refused.
"""

from __future__ import annotations

import io
import json
import shlex
import tarfile
from pathlib import Path
from typing import Any

import pytest

from app.core.rules import Matcher, Rule, RuleBook, RuleDecision
from app.core.tasks import TaskError, parse_allow
from tests.fakellm import ScriptedLLM, text, tool_calls
from tests.test_hostile import ask, make_world, results
from tests.test_shell_tools import sandbox  # noqa: F401 (autouse: a sandbox or a failure)
from tools.shell.hooks import command_parts
from tools.spec import Subject

PROJ = Path("/work/proj")
TOOL = "shell_run"


def subject(line: str, folder: Path = PROJ) -> Subject:
    return Subject(paths=(str(folder),), command=line, commands=command_parts(line, folder))


def always_allow(line: str, folder: Path = PROJ) -> RuleBook:
    """The rules "Always allow" on an approval card for `line` adds."""
    from app.core.pipeline import CallFacts, _proposals
    from tools.registry import ToolSource
    from tools.shell.manifest import MANIFESTS
    from tools.spec import Escalation

    manifest = next(m for m in MANIFESTS if m.name == TOOL)
    facts = CallFacts(
        manifest=manifest,
        params=None,
        source=ToolSource("builtin", "builtin"),
        trusted=True,
        subject=subject(line, folder),
        escalation=Escalation("runs a command on your machine, sandboxed"),
    )
    (proposal,) = _proposals(facts)
    book = RuleBook(None)
    book.add_many(proposal.rules)
    return book


def allowed(book: RuleBook, line: str, folder: Path = PROJ) -> bool:
    return book.evaluate(TOOL, "builtin", subject(line, folder)).decision is RuleDecision.ALLOW


def rule(prefix: str, *, folder: str = "", exact: bool = False) -> Rule:
    return Rule(
        tool=TOOL,
        matcher=Matcher(kind="command", value=prefix, folder=folder, exact=exact),
        decision=RuleDecision.ALLOW,
    )


# ---- 1 and 2: assignments in front, or earlier in the line, are not covered -----------------

#: Variables that change what a program runs or loads: the review's list and made-up names
#: no list could know (the next tool's FOO_OPTIONS).
FOREIGN = [
    "TAR_OPTIONS", "GNUMAKEFLAGS", "MAKEFILES", "PYTEST_ADDOPTS", "PYTEST_PLUGINS",
    "CURL_HOME", "WGETRC", "LESS", "MANOPT", "GREP_OPTIONS", "ZZ_NEXT_TOOL_OPTIONS",
]  # fmt: skip


@pytest.mark.parametrize("name", FOREIGN)
@pytest.mark.parametrize(
    "shape",
    [
        "{name}=x tar -tf docs.tar",
        "env {name}=x tar -tf docs.tar",
        "{name}=x; tar -tf docs.tar",
        "export {name}=x; tar -tf docs.tar",
        "export {name}; tar -tf docs.tar",
        "declare -x {name}=x && tar -tf docs.tar",
        "read {name} <<< x; tar -tf docs.tar",
        "for {name} in x; do tar -tf docs.tar; done",
        "timeout 5 env {name}=x tar -tf docs.tar",
    ],
)
def test_a_variable_not_known_to_be_inert_makes_a_covered_command_ask(name: str, shape: str):
    book = always_allow("tar -tf docs.tar")
    assert allowed(book, "tar -tf docs.tar")
    assert not allowed(book, shape.format(name=name))


@pytest.mark.parametrize(
    "line", ["LANG=C tar -tf docs.tar", "LC_ALL=C TZ=UTC NO_COLOR=1 tar -tvf docs.tar"]
)
def test_variables_that_only_change_how_text_looks_stay_covered(line: str):
    assert allowed(always_allow("tar -tf docs.tar"), line)


# ---- 3: options anywhere; exact rules are exact ------------------------------------------------


@pytest.mark.parametrize(
    "approved, later",
    [
        ("sed -n 1,5p f.txt", "sed -n 1,5p f.txt -e '1e touch pwned'"),
        ("sed -n 1,5p f.txt", "sed -n 1,5p f.txt --expression='1e id'"),
        ("sed -n 1,5p f.txt", "sed -n 1,5p f.txt -s -f evil.sed"),
        ("git log", "git log --output=/tmp/x"),
        ("git log", "git log --out=/tmp/x"),  # getopt takes an abbreviation
        ("git log", "git log --ext-diff"),
        ("git log", "git log -p --textconv"),
        ("ls -la", "ls -la --hyperlink=always --zzz"),
        ("grep -rn TODO src", "grep -rn TODO src --devices=read --zzz"),
        ("sort names.txt", "sort names.txt --compress-program=sh"),
        ("tar -tf docs.tar", "tar -tf docs.tar --to-command='sh -c id'"),
        ("tar -tf docs.tar", "tar -tf docs.tar -I 'sh -c id'"),
        ("tar -tf docs.tar", "tar -tf docs.tar --use-comp=sh"),
        ("head -n 5 f.txt", "head -n 5 f.txt ---presume-input-pipe"),
    ],
)
def test_an_option_not_known_to_be_inert_is_never_covered_by_a_prefix(approved: str, later: str):
    book = RuleBook(None, [rule(approved, folder=str(PROJ))])
    assert allowed(book, approved)
    assert not allowed(book, later)
    assert not allowed(always_allow(approved), later)


@pytest.mark.parametrize(
    "approved, later",
    [
        ("git status", "git status --short -b"),
        ("git log", "git log --oneline -n 5 src/app.py"),
        ("ls", "ls -la --color=auto src"),
        ("grep", "grep -rn --include=*.py TODO ."),
        ("tar", "tar -tvzf docs.tar"),
        ("head", "head -5 f.txt"),
    ],
)
def test_inert_options_and_operands_stay_covered(approved: str, later: str):
    book = RuleBook(None, [rule(approved, folder=str(PROJ))])
    assert allowed(book, later)


def test_an_exact_rule_covers_only_that_command():
    book = RuleBook(None, [rule("sed -n 1,5p f.txt", exact=True)])
    assert allowed(book, "sed -n 1,5p f.txt")
    assert not allowed(book, "sed -n 1,5p f.txt g.txt")
    assert not allowed(book, "sed -n 1,5p")


def test_always_allow_on_an_odd_command_proposes_exactly_that_command():
    book = always_allow("sed -n 1,5p f.txt -e p")
    (made,) = book.rules()
    assert made.matcher.exact and made.matcher.value == "sed -n 1,5p f.txt -e p"
    assert "exactly" in made.describe()
    assert not allowed(book, "sed -n 1,5p f.txt -e p -e '1e id'")


# ---- 4: programs that run other programs ------------------------------------------------------


@pytest.mark.parametrize(
    "approved, later",
    [
        ("git clone https://example.com/a.git", "git clone -u 'sh -c id' https://example.com/a"),
        ("git clone https://example.com/a.git", "git clone --upload-pack=id x"),
        ("git grep TODO", "git grep -O TODO"),
        ("git grep TODO", "git grep --open-files-in-pager=id TODO"),
        ("git grep TODO", "git grep -Oid TODO"),
        ("awk '{print $1}' names.txt", "awk 'BEGIN{system(\"id\")}'"),
        ("awk '{print $1}' names.txt", "awk '{print $1}' names.txt -f evil.awk"),
        ("awk '{print $1}' names.txt", "gawk -l filefuncs '{print $1}' names.txt"),
        ("sed -n 1p f.txt", "sed 'e id' f.txt"),
        ("sed -n 1p f.txt", "sed -n 's/x/id/e' f.txt"),
        ("find . -name '*.py'", "find . -name '*.py' -exec sh -c id ';'"),
        ("find . -name '*.py'", "find . -name '*.py' -fprint out.txt"),
        ("find . -name '*.py'", "find . -name x -ok id ';'"),
        ("python3 build.py", "python3 -c 'import os; os.system(\"id\")'"),
        ("python3 -m pytest", "python3 -m pytest -p evil_plugin"),
        ("pytest", "pytest -p evil_plugin"),
        ("pytest", "pytest --override-ini=addopts=-pevil"),
        ("make test", "make --eval='x:=$(shell id)' test"),
    ],
)
def test_a_rule_for_a_program_that_runs_programs_covers_only_its_own_script(
    approved: str, later: str
):
    book = RuleBook(None, [rule(approved, folder=str(PROJ))])
    assert allowed(book, approved)
    assert not allowed(book, later)


@pytest.mark.parametrize(
    "line",
    [
        "sqlite3 app.db",
        "sqlite3 app.db < cmds.sql",
        "printf '.shell id' | sqlite3 app.db",
        "ed notes.txt <<< '!id'",
        "gdb -batch prog < cmds",
        "dc <<< '!id'",
    ],
)
def test_a_program_whose_commands_come_from_its_input_is_never_covered(line: str):
    words = shlex.split(line)
    book = RuleBook(None, [rule(words[0], folder=str(PROJ)), rule(line, folder=str(PROJ))])
    book.add(rule("printf", folder=str(PROJ)))
    assert not allowed(book, line)


@pytest.mark.parametrize(
    "line, why",
    [
        ("shell_run,command=awk", "runs the program text"),
        ("shell_run,command=gawk", "runs the program text"),
        ("shell_run,command=sed", "runs the program text"),
        ("shell_run,command=sqlite3", "reads the commands it runs from its input"),
        ("shell_run,command=ed", "reads the commands it runs from its input"),
        ("shell_run,command=python3", "runs the program text"),
        ("shell_run,command=xargs", "only runs another program"),
        ("shell_run,command=env", "only runs another program"),
        ("shell_run,command=timeout 5", "only runs another program"),
        ("shell_run,command=nice", "only runs another program"),
        ("shell_run,command=git", "name what git should do"),
        ("shell_run,command=npm", "name what npm should do"),
        ("shell_run,command=make", "must name that folder"),
        ("shell_run,command=git status", "must name that folder"),
    ],
)
def test_a_task_profile_naming_a_program_that_runs_anything_is_refused_in_plain_words(
    line: str, why: str
):
    with pytest.raises(TaskError) as refused:
        parse_allow(line)
    assert why in str(refused.value)


def test_a_task_profile_can_bind_a_command_rule_to_a_folder():
    entry = parse_allow("shell_run,command=make test,folder=/work/proj")
    assert entry.matcher == Matcher(kind="command", value="make test", folder="/work/proj")
    book = RuleBook(None, [entry.as_rule("t1", "Nightly")])
    assert book.evaluate(TOOL, "builtin", subject("make test"), task_id="t1").decision is (
        RuleDecision.ALLOW
    )
    elsewhere = subject("make test", Path("/work/other"))
    assert book.evaluate(TOOL, "builtin", elsewhere, task_id="t1").decision is None
    exact = parse_allow("shell_run,command=awk '{print $1}' names.txt,exact")
    assert exact.matcher.exact and exact.matcher.value == "awk '{print $1}' names.txt"


# ---- 5: the folder each command runs in ------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "cd ../Downloads/evil && make",
        "cd ../Downloads/evil; make",
        "cd /tmp && make",
        "cd && make",
        "cd ~ && make",
        "pushd ../evil && make",
        "cd sub && cd ../../evil && make",
        "(cd ../evil; make)",
        "cd ../evil | make",
        "cd \"$OLDPWD\" && make",
        "cd - && make",
        "for d in a; do make; cd ../evil; done",
        "shopt -s cdable_vars; cd HOME && make",
        "bash -c 'cd ../evil && make'",
        "cd ../evil && timeout 60 make",
        "make -C ../evil",
        "make --directory=../evil",
        "make -f ../evil/Makefile",
    ],
)
def test_a_folder_rule_does_not_follow_a_cd_or_option_out_of_its_folder(line: str):
    book = RuleBook(None, [rule("cd"), rule("make", folder=str(PROJ)), rule("pushd")])
    assert allowed(book, "make")
    assert not allowed(book, line)


@pytest.mark.parametrize(
    "line", ["cd sub && make", "cd sub; make test", "cd ./a/b && make all", "cd . && make"]
)
def test_a_cd_inside_the_rules_folder_stays_covered(line: str):
    book = RuleBook(None, [rule("cd"), rule("make", folder=str(PROJ))])
    assert allowed(book, line)


@pytest.mark.parametrize(
    "line",
    [
        "pytest /elsewhere/test_x.py",
        "pytest ../other/test_x.py",
        "pytest tests/../../other/test_x.py",
        "pytest --rootdir=/elsewhere",
        "python3 ../other/build.py",
        "git log -- /etc/passwd",
    ],
)
def test_a_path_operand_outside_the_rules_folder_is_not_covered(line: str):
    book = RuleBook(None, [rule(w, folder=str(PROJ)) for w in ("pytest", "python3", "git log")])
    book.add(rule("python3 ../other/build.py", folder=str(PROJ), exact=True))
    assert allowed(book, "pytest tests/test_a.py")
    assert not allowed(book, line)


def test_a_symlink_operand_is_judged_by_where_it_leads(tmp_path: Path):
    proj, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    proj.mkdir()
    elsewhere.mkdir()
    (proj / "link").symlink_to(elsewhere)
    book = RuleBook(None, [rule("pytest", folder=str(proj))])
    assert allowed(book, "pytest tests", proj)
    assert not allowed(book, "pytest link/test_x.py", proj)


def test_always_allow_is_not_offered_for_a_folder_rule_that_would_reach_outside():
    from app.core.pipeline import CallFacts, _proposals
    from tools.registry import ToolSource
    from tools.shell.manifest import MANIFESTS
    from tools.spec import Escalation

    manifest = next(m for m in MANIFESTS if m.name == TOOL)
    facts = CallFacts(
        manifest=manifest,
        params=None,
        source=ToolSource("builtin", "builtin"),
        trusted=True,
        subject=subject("pytest /elsewhere/test_x.py"),
        escalation=Escalation("runs a command on your machine, sandboxed"),
    )
    assert _proposals(facts) == []


# ---- 6: a program Deskhand does not know ------------------------------------------------------


@pytest.mark.parametrize(
    "approved, later",
    [
        ("mytool build", "mytool build --plugin=./evil.so"),
        ("mytool build", "mytool build extra"),
        ("docker ps", "docker ps --format '{{json .}}'"),
        ("./scripts/check.sh", "./scripts/check.sh --fix"),
        ("/usr/bin/ls -la", "/usr/bin/ls -la /etc"),
    ],
)
def test_a_program_deskhand_does_not_know_gets_exact_rules_only(approved: str, later: str):
    book = always_allow(approved)
    (made,) = book.rules()
    assert made.matcher.exact
    assert allowed(book, approved)
    assert not allowed(book, later)


def test_deny_rules_still_match_widely():
    deny = Rule(tool=TOOL, matcher=Matcher(kind="command", value="git push"),
                decision=RuleDecision.DENY)  # fmt: skip
    book = RuleBook(None, [deny])
    for line in ("git push --force", "GIT_SSH_COMMAND=x git push", "cd .. && git push -f"):
        assert book.evaluate(TOOL, "builtin", subject(line)).decision is RuleDecision.DENY, line


def test_a_command_given_as_one_string_follows_the_same_allow_list():
    matcher = Matcher(kind="command", value="ls")
    assert matcher.matches(Subject(command="ls -la /data"))
    assert not matcher.matches(Subject(command="ls --zzz"))
    assert not Matcher(kind="command", value="mytool").matches(Subject(command="mytool x"))


# ---- end to end: real bash and bubblewrap, nobody answers ---------------------------------------


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    return project_world(tmp_path, monkeypatch)


def project_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """proj (docs.tar, f.txt, a Makefile) and other (a Makefile that touches pwned) in the
    one allowed folder; the current folder is proj."""
    found = make_world(tmp_path, monkeypatch)
    proj, other = found["work"] / "proj", found["work"] / "other"
    proj.mkdir()
    other.mkdir()
    data = b"hello\n"
    with tarfile.open(proj / "docs.tar", "w") as archive:
        info = tarfile.TarInfo("readme.txt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    (proj / "f.txt").write_text("one\ntwo\n")
    (proj / "Makefile").write_text("all:\n\t@echo built here\n")
    (other / "Makefile").write_text("all:\n\t@touch pwned\n")
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    monkeypatch.chdir(proj)
    return {**found, "proj": proj, "other": other}


def write_rules(home: Path, book: RuleBook) -> None:
    rules = [r.model_dump(mode="json") for r in book.rules()]
    (home / "rules.json").write_text(json.dumps({"version": 1, "rules": rules}))


def run(llm: ScriptedLLM, world: dict[str, Path], capsys: Any, line: str) -> dict[str, Any]:
    llm.add(tool_calls(("c1", TOOL, {"command": line, "folder": str(world["proj"])})))
    llm.add(text("done"))
    [result] = results(ask(llm, world["home"], capsys=capsys))
    return result


@pytest.mark.parametrize(
    "line",
    [
        "TAR_OPTIONS='--checkpoint=1 --checkpoint-action=exec=touch\\ pwned' tar -tf docs.tar",
        "export TAR_OPTIONS='--checkpoint=1 --checkpoint-action=exec=touch\\ pwned'; "
        "tar -tf docs.tar",
    ],
)
def test_the_critical_chain_one_always_allow_on_tar_runs_nothing_else(llm, world, capsys, line):
    """The review's critical chain: "Always allow" once on `tar -tf docs.tar`, then the same
    command with TAR_OPTIONS set in front or exported before it."""
    book = always_allow("tar -tf docs.tar", world["proj"])
    write_rules(world["home"], book)
    assert run(llm, world, capsys, "tar -tf docs.tar")["ok"]
    result = run(llm, world, capsys, line)
    assert not result["ok"], result
    assert not (world["proj"] / "pwned").exists()


def test_an_exact_sed_rule_does_not_run_a_sed_program_added_after_it(llm, world, capsys):
    write_rules(world["home"], RuleBook(None, [rule("sed -n 1,5p f.txt", exact=True)]))
    assert "one" in run(llm, world, capsys, "sed -n 1,5p f.txt")["content"]
    result = run(llm, world, capsys, "sed -n 1,5p f.txt -e '1e touch pwned'")
    assert not result["ok"], result
    assert not (world["proj"] / "pwned").exists()


def test_a_make_rule_does_not_run_another_folders_makefile_after_cd(llm, world, capsys):
    book = RuleBook(None, [rule("cd"), rule("make", folder=str(world["proj"]))])
    write_rules(world["home"], book)
    assert "built here" in run(llm, world, capsys, "make")["content"]
    result = run(llm, world, capsys, "cd ../other && make")
    assert not result["ok"], result
    assert not (world["other"] / "pwned").exists()


def test_always_allow_on_a_container_command_covers_it_again_but_nothing_it_did_not_show():
    from app.core.pipeline import _one_string_proposal

    def made(command: str) -> Matcher:
        (proposal,) = _one_string_proposal("docker_exec", command, lambda m: Rule(
            tool="docker_exec", matcher=m, decision=RuleDecision.ALLOW))
        return proposal.rule.matcher

    ls = made("ls -la /data")
    assert not ls.exact and ls.value == "ls -la"
    assert ls.matches(Subject(command="ls -la /srv"))
    assert not ls.matches(Subject(command="ls -la --zzz"))
    unknown = made("myapp run --fast")
    assert unknown.exact and unknown.matches(Subject(command="myapp run --fast"))
    assert not unknown.matches(Subject(command="myapp run --fast --plugin=x"))


@pytest.mark.parametrize(
    "line",
    [
        "env -C ../evil make",
        "env --chdir=../evil make",
        "env -C/tmp make",
        "find ../evil -name Makefile -execdir make ';'",
        "env -u PAGER make",
        "env --unset=GIT_TERMINAL_PROMPT make",
    ],
)
def test_a_wrapper_that_moves_or_changes_the_environment_is_not_covered(line: str):
    book = RuleBook(None, [rule("make", folder=str(PROJ)), rule("find")])
    assert allowed(book, "env LANG=C make")
    assert not allowed(book, line)


@pytest.mark.parametrize("line", ["rm build.log", "cp a.txt b.txt", "chmod 644 notes.txt"])
def test_always_allow_on_a_command_that_changes_files_is_for_exactly_that_command(line: str):
    book = always_allow(line)
    (made,) = book.rules()
    assert made.matcher.exact and made.matcher.value == line
    assert allowed(book, line)
    assert not allowed(book, line.split()[0] + " -rf src")
