"""What a command rule may cover: programs Deskhand knows, and their known-inert options.

A prefix rule ("git status", "ls") covers a command only when the words after the prefix are
operands or options on that program's list of options known to change nothing about what
runs or where it writes (`git status --short`, `ls -la src`). Any other option — one Deskhand
does not know, an abbreviation, one that runs a program (`git grep -O`, `tar
--checkpoint-action`), loads code or points elsewhere — leaves only a rule for exactly that
command. A program Deskhand does not know gets exact-command rules only.

Programs that run a script they are given (awk, sed, python -c…) are interpreters: a rule
must include the script, so approving `awk '{print $1}'` never approves another awk program.
Programs that read their program from their input (ed, gdb, sqlite3 without SQL…) and
programs that only exist to run another program (env, xargs, timeout…) are never named
alone by a rule.

This is an allow-list on purpose: a list of dangerous options always misses one.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

#: Variables a covered command may carry in front (`LANG=C git log`): they change only how
#: text looks. Any other assignment makes the command uncoverable.
INERT_VARIABLES = frozenset(
    {
        "LANG", "LANGUAGE", "TZ", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE",
        "TERM", "COLUMNS", "LINES", "COLORTERM", "PYTHONUNBUFFERED", "PYTHONIOENCODING",
        "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "PYTHONWARNINGS", "RUST_BACKTRACE",
        "RUST_LOG", "NODE_ENV", "DEBUG", "VERBOSE", "CI_COLOR",
    }
)  # fmt: skip


def inert_variable(name: str) -> bool:
    """Known to change only how output looks (LANG, LC_*, TZ, NO_COLOR, TERM, COLUMNS…)."""
    return name in INERT_VARIABLES or name.startswith("LC_")


@dataclass(frozen=True)
class Program:
    """A program's known-inert options, and how its words are laid out."""

    #: Short option letters without a value (clusterable: `-la`).
    flags: frozenset[str] = frozenset()
    #: Short option letters taking a value (attached `-n5` or the next word).
    valued: frozenset[str] = frozenset()
    #: Short option letters with an optional value, attached only (make's `-j`, `-j4`).
    optional: frozenset[str] = frozenset()
    long_flags: frozenset[str] = frozenset()
    #: Long options taking a value (`--sort=x` or `--sort x`).
    long_valued: frozenset[str] = frozenset()
    #: Long options with an optional value, attached only (`--color`, `--color=auto`).
    long_optional: frozenset[str] = frozenset()
    #: The first operand is a program text (awk, sed): a rule must include it.
    script: bool = False
    #: `-5` is an inert option (head, tail, git log).
    digits: bool = False
    #: A word starting with '+' is an operand (date +%s).
    plus_operand: bool = False
    #: The first word may be option letters without '-' (`tar tzf a.tgz`); each letter
    #: taking a value takes the next word, in turn.
    bundled: bool = False
    #: A NAME=value operand is not inert (make: `MAKEFLAGS=--eval=…`, `MAKEFILES=…`).
    assignments_run: bool = False
    #: Operands past this many are written to (`uniq IN OUT`, `xxd IN OUT`).
    max_operands: int | None = None
    #: Subcommands Deskhand knows: a rule must name one (`git status`, not `git`).
    subcommands: dict[str, Program] = field(default_factory=dict)


def _spec(
    options: str = "",
    *,
    script: bool = False,
    digits: bool = False,
    plus_operand: bool = False,
    bundled: bool = False,
    assignments_run: bool = False,
    max_operands: int | None = None,
) -> Program:
    """Options written as people read them: "-a -n: --all --sort= --color=?"."""
    flags: set[str] = set()
    valued: set[str] = set()
    optional: set[str] = set()
    long_flags: set[str] = set()
    long_valued: set[str] = set()
    long_optional: set[str] = set()
    for token in options.split():
        if token.startswith("-") and len(token) == 3 and token.endswith("?"):
            optional.add(token[1])
        elif token.startswith("--") or (len(token) > 2 and not token.endswith(":")) or (
            len(token) > 3
        ):  # --long, and single-dash long options (go's -race, python's -OO) taken whole
            if token.endswith("=?"):
                long_optional.add(token[:-2])
            elif token.endswith("="):
                long_valued.add(token[:-1])
            else:
                long_flags.add(token)
        elif token.startswith("-"):
            (valued if token.endswith(":") else flags).add(token[1])
        else:
            raise ValueError(f"not an option: {token}")
    return Program(
        flags=frozenset(flags),
        valued=frozenset(valued),
        optional=frozenset(optional),
        long_flags=frozenset(long_flags),
        long_valued=frozenset(long_valued),
        long_optional=frozenset(long_optional),
        script=script,
        digits=digits,
        plus_operand=plus_operand,
        bundled=bundled,
        assignments_run=assignments_run,
        max_operands=max_operands,
    )


_HELP = " -h --help --version"
_COLOR = " --color=? --colour=? --no-color"

_LS = _spec(
    "-a -A -l -h -t -r -S -1 -d -F -R -i -s -c -u -U -X -v -p -n -G -g -o -C -x -m -Q -N -b -k"
    " -L -H -Z --all --almost-all --human-readable --reverse --recursive --directory"
    " --classify --inode --size --sort= --time= --time-style= --group-directories-first"
    " --full-time --si --numeric-uid-gid --width= -w: --hide= --ignore= -I: --block-size="
    " --quoting-style= --literal --indicator-style= --dereference --file-type -T: --tabsize="
    + _COLOR + _HELP
)
_GREP = _spec(
    "-i -v -n -l -L -c -r -R -w -x -o -h -H -s -q -E -F -G -P -z -Z -a -I -U -b -T"
    " -e: -m: -A: -B: -C: -d: -D: --ignore-case --no-ignore-case --invert-match --line-number"
    " --files-with-matches --files-without-match --count --recursive --dereference-recursive"
    " --word-regexp --line-regexp --only-matching --no-filename --with-filename --no-messages"
    " --quiet --silent --extended-regexp --fixed-strings --basic-regexp --perl-regexp"
    " --null --null-data --text --binary --byte-offset --initial-tab --label="
    " --regexp= --max-count= --after-context= --before-context= --context= --include="
    " --exclude= --exclude-dir= --binary-files= --directories= --devices= -f: --file="
    + _COLOR + _HELP,
    digits=True,
)
_RG = _spec(
    "-i -s -S -v -n -N -l -c -w -x -o -F -P -U -z -L -u -H -I -a -0 -q -j: -e: -m: -A: -B: -C:"
    " -g: -t: -T: -M: -r: -E: --ignore-case --case-sensitive --smart-case --invert-match"
    " --line-number --no-line-number --files-with-matches --files-without-match --count"
    " --count-matches --word-regexp --line-regexp --only-matching --fixed-strings --pcre2"
    " --multiline --follow --hidden --no-ignore --no-ignore-vcs --no-heading --heading"
    " --with-filename --no-filename --text --null --quiet --files --json --vimgrep --stats"
    " --sort= --sortr= --glob= --iglob= --type= --type-not= --max-count= --max-depth="
    " --after-context= --before-context= --context= --threads= --replace= --max-columns="
    " --type-list --trim --column --no-messages --encoding= --regexp=" + _COLOR + _HELP
)
_HEAD_TAIL = _spec(
    "-n: -c: -q -v -z -f -F -s: --lines= --bytes= --quiet --silent --verbose --zero-terminated"
    " --follow=? --retry --pid= --sleep-interval=" + _HELP,
    digits=True,
)
_FIND = _spec(
    "-L -P -H -O:" + _HELP
)  # find's expression is checked by find_expression_inert (primaries, not options)
#: find primaries that only test or print (never -exec, -ok, -delete, -fprint, -fls).
FIND_INERT = frozenset(
    {
        "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
        "-regextype", "-type", "-xtype", "-maxdepth", "-mindepth", "-mtime", "-mmin", "-atime",
        "-amin", "-ctime", "-cmin", "-newer", "-anewer", "-cnewer", "-size", "-empty", "-user",
        "-group", "-uid", "-gid", "-nouser", "-nogroup", "-perm", "-readable", "-writable",
        "-executable", "-links", "-inum", "-samefile", "-lname", "-ilname", "-print",
        "-print0", "-printf", "-ls", "-prune", "-quit", "-depth", "-xdev", "-mount", "-true",
        "-false", "-not", "-a", "-o", "-and", "-or", "-follow", "-daystart", "-noleaf",
        "-fstype", "-used", "-newermt", "-newerct", "-newerat", "-nowarn", "-warn",
        "!", "(", ")", ",",
    }
)  # fmt: skip

_SORT = _spec(
    "-b -d -f -g -h -i -M -n -R -r -V -c -C -m -s -u -z -k: -t: -S: --ignore-leading-blanks"
    " --dictionary-order --ignore-case --general-numeric-sort --human-numeric-sort"
    " --month-sort --numeric-sort --random-sort --reverse --version-sort --check=? --merge"
    " --stable --unique --zero-terminated --key= --field-separator= --buffer-size="
    " --parallel=" + _HELP
)
_SIMPLE: dict[str, Program] = {
    "ls": _LS,
    "dir": _LS,
    "cat": _spec("-n -b -s -A -e -E -t -T -v -u --number --number-nonblank --squeeze-blank"
                 " --show-all --show-ends --show-tabs --show-nonprinting" + _HELP),
    "tac": _spec("-b -r -s: --before --regex --separator=" + _HELP),
    "head": _HEAD_TAIL,
    "tail": _HEAD_TAIL,
    "wc": _spec("-l -w -c -m -L --lines --words --bytes --chars --max-line-length" + _HELP),
    "grep": _GREP,
    "egrep": _GREP,
    "fgrep": _GREP,
    "rg": _RG,
    "find": _FIND,
    "sort": _SORT,
    "uniq": _spec("-c -d -D -i -u -z -f: -s: -w: --count --repeated --ignore-case --unique"
                  " --skip-fields= --skip-chars= --check-chars= --zero-terminated" + _HELP,
                  max_operands=1),
    "cut": _spec("-b: -c: -d: -f: -s -z -n --bytes= --characters= --delimiter= --fields="
                 " --only-delimited --complement --output-delimiter= --zero-terminated" + _HELP),
    "tr": _spec("-c -C -d -s -t --complement --delete --squeeze-repeats --truncate-set1" + _HELP),
    "diff": _spec("-u -U: -c -C: -q -r -N -a -b -w -B -i -y -W: -p -s -t -T --unified=?"
                  " --context=? --brief --recursive --new-file --text --ignore-space-change"
                  " --ignore-all-space --ignore-blank-lines --ignore-case --side-by-side"
                  " --width= --show-c-function --report-identical-files --expand-tabs"
                  " --strip-trailing-cr --exclude= -x: --label=" + _COLOR + _HELP),
    "cmp": _spec("-b -l -s -n: -i: --print-bytes --verbose --quiet --silent --bytes="
                 " --ignore-initial=" + _HELP),
    "comm": _spec("-1 -2 -3 -i -z --check-order --nocheck-order --output-delimiter="
                  " --total --zero-terminated" + _HELP),
    "basename": _spec("-a -s: -z --multiple --suffix= --zero" + _HELP),
    "dirname": _spec("-z --zero" + _HELP),
    "realpath": _spec("-e -m -L -P -q -s -z --canonicalize-existing --canonicalize-missing"
                      " --logical --physical --quiet --strip --no-symlinks --zero"
                      " --relative-to= --relative-base=" + _HELP),
    "readlink": _spec("-f -e -m -n -q -s -v -z --canonicalize --canonicalize-existing"
                      " --canonicalize-missing --no-newline --quiet --silent --verbose"
                      " --zero" + _HELP),
    "pwd": _spec("-L -P" + _HELP),
    "echo": _spec("-n -e -E"),
    "printf": _spec("--help --version"),
    "true": _spec(),
    "false": _spec(),
    "date": _spec("-u -R -I -d: -r: --utc --universal --rfc-email --iso-8601=? --rfc-3339="
                  " --date= --reference=" + _HELP, plus_operand=True),
    "whoami": _spec(_HELP),
    "id": _spec("-u -g -G -n -r -z --user --group --groups --name --real --zero" + _HELP),
    "uname": _spec("-a -s -n -r -v -m -p -i -o --all --kernel-name --nodename"
                   " --kernel-release --kernel-version --machine --processor"
                   " --hardware-platform --operating-system" + _HELP),
    "which": _spec("-a" + _HELP),
    "stat": _spec("-L -f -t -c: --dereference --file-system --terse --format= --printf="
                  + _HELP),
    "file": _spec("-b -i -L -h -z -s -k -N --brief --mime --mime-type --mime-encoding"
                  " --dereference --no-dereference --uncompress --special-files"
                  " --keep-going" + _HELP),
    "du": _spec("-a -b -c -h -k -m -s -x -L -P -l -d: --all --bytes --total --human-readable"
                " --summarize --one-file-system --dereference --max-depth= --apparent-size"
                " --si --exclude= --block-size= --time=?" + _HELP),
    "df": _spec("-a -h -H -i -k -l -P -T -t: -x: --all --human-readable --si --inodes"
                " --local --portability --print-type --type= --exclude-type= --output=?"
                " --total --block-size=" + _HELP),
    "tree": _spec("-a -d -f -i -l -s -h -u -g -D -F -C -n -p -r -t -L: -P: -I: --noreport"
                  " --dirsfirst --prune --du --charset= --filelimit=" + _HELP),
    "nl": _spec("-b: -n: -w: -s: -v: -i: --body-numbering= --number-format="
                " --number-width= --number-separator=" + _HELP),
    "od": _spec("-A: -t: -N: -j: -w: -v -c -x -d -o -a -b --address-radix= --format="
                " --read-bytes= --skip-bytes= --width=?" + _HELP),
    "hexdump": _spec("-C -c -b -d -o -x -v -n: -s:" + _HELP),
    "md5sum": _spec("-b -c -t -z --binary --check --text --quiet --status --strict --tag"
                    " --zero" + _HELP),
    "sha1sum": _spec("-b -c -t -z --binary --check --text --quiet --status --tag" + _HELP),
    "sha256sum": _spec("-b -c -t -z --binary --check --text --quiet --status --tag" + _HELP),
    "sha512sum": _spec("-b -c -t -z --binary --check --text --quiet --status --tag" + _HELP),
    "base64": _spec("-d -i -w: --decode --ignore-garbage --wrap=" + _HELP),
    "column": _spec("-t -s: -o: -c: -n -x -e -J --table --separator= --output-separator="
                    " --output-width=" + _HELP),
    "fold": _spec("-b -s -w: --bytes --spaces --width=" + _HELP),
    "paste": _spec("-s -d: -z --serial --delimiters= --zero-terminated" + _HELP),
    "join": _spec("-i -a: -e: -o: -t: -v: -1: -2: --ignore-case --check-order"
                  " --nocheck-order --header" + _HELP),
    "seq": _spec("-w -s: -f: --equal-width --separator= --format=" + _HELP),
    "sleep": _spec(_HELP),
    "test": _spec(),
    "[": _spec(),
    "[[": _spec(),
    "jq": _spec("-r -j -c -n -e -s -S -a -C -M --raw-output --join-output --compact-output"
                " --null-input --exit-status --slurp --sort-keys --ascii-output --tab"
                " --indent= --arg= --argjson= --raw-input -R --seq" + _HELP),
    "cd": _spec("-L -P"),
    "pushd": _spec(),
    "mkdir": _spec("-p -v -m: --parents --verbose --mode=" + _HELP),
    "touch": _spec("-a -c -m -d: -t: -r: --no-create --date= --reference=" + _HELP),
    "cp": _spec("-a -r -R -f -i -n -v -p -u -L -P -d -l -s -x -T -t: --archive --recursive"
                " --force --no-clobber --verbose --update=? --preserve=? --no-preserve="
                " --parents --target-directory= --no-target-directory --backup=?" + _HELP),
    "mv": _spec("-f -i -n -v -u -T -t: --force --no-clobber --verbose --update=?"
                " --target-directory= --no-target-directory --backup=?" + _HELP),
    "rm": _spec("-f -r -R -d -v -i -I --force --recursive --dir --verbose"
                " --one-file-system" + _HELP),
    "rmdir": _spec("-p -v --parents --verbose --ignore-fail-on-non-empty" + _HELP),
    "ln": _spec("-s -f -n -v -r -T -t: --symbolic --force --no-dereference --verbose"
                " --relative --target-directory= --no-target-directory" + _HELP),
    "tar": _spec("-t -x -c -z -j -J -v -f: -a -k -O -p -P --list --extract --get --create"
                 " --gzip --bzip2 --xz --zstd --verbose --file= --auto-compress"
                 " --keep-old-files --to-stdout --preserve-permissions --exclude="
                 " --strip-components= --wildcards --no-same-owner --totals" + _HELP,
                 bundled=True),
    "unzip": _spec("-l -t -v -q -o -n -j -p -Z -z" + _HELP),
    "gzip": _spec("-d -c -k -l -t -v -f -n -q -r -1 -2 -3 -4 -5 -6 -7 -8 -9 --decompress"
                  " --stdout --keep --list --test --verbose --force --quiet" + _HELP),
    "gunzip": _spec("-c -k -l -t -v -f -q --stdout --keep --list --test --verbose"
                    " --force" + _HELP),
    "zcat": _spec("-f --force" + _HELP),
    "xxd": _spec("-p -i -u -c: -g: -l: -s: -b -e" + _HELP, max_operands=1),
}  # fmt: skip

#: Interpreters that take their program as the first operand; a rule must include it.
#: `-e`, `-f` and every option not listed leave exact rules only.
_SCRIPTED: dict[str, Program] = {
    "sed": _spec("-n -E -r -s -u -z --quiet --silent --regexp-extended --separate"
                 " --unbuffered --null-data --posix --sandbox --debug -l: --line-length="
                 + _HELP, script=True),
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), _spec(
        "-F: -v: --field-separator= --assign= --posix --traditional --sandbox -S -c"
        + _HELP, script=True)),
}  # fmt: skip

_GIT_COMMON = " -q --quiet -v --verbose" + _COLOR + _HELP
_GIT_LOGLIKE = (
    " --oneline -n: --max-count= -p -u --patch --no-patch -s --stat=? --shortstat --numstat"
    " --name-only --name-status --graph --decorate=? --no-decorate --all --branches=?"
    " --tags=? --remotes=? --author= --committer= --since= --until= --after= --before="
    " --grep= -i --regexp-ignore-case --reverse --format= --pretty=? --date= --abbrev-commit"
    " --no-abbrev-commit --abbrev=? --no-merges --merges --first-parent -S: -G: --follow"
    " --source --walk-reflogs -g --cherry --left-right --topo-order --date-order"
    " --relative-date --full-history --simplify-by-decoration -M -C -w --no-ext-diff"
    " --no-textconv --diff-filter= --find-renames=? -U? --unified= --word-diff=?"
    " --ignore-all-space -b --ignore-space-change --dirstat=? --summary --raw -z -L:"
)
_GIT_DIFFLIKE = (
    " -p -u --patch -s --no-patch --stat=? --shortstat --numstat --name-only --name-status"
    " --cached --staged -U? --unified= --word-diff=? --color-words=? --no-ext-diff"
    " --no-textconv -w -b --ignore-all-space --ignore-space-change --ignore-blank-lines"
    " --check --exit-code --quiet -R -M -C --find-renames=? --find-copies=? --diff-filter="
    " --summary --raw -z --minimal --patience --histogram --diff-algorithm= --relative=?"
    " --merge-base -a --text --ignore-cr-at-eol --abbrev=? --dirstat=? --no-index"
)
_GIT: dict[str, str] = {
    "status": "-s --short -b --branch --porcelain=? --long -u --untracked-files=? --ignored=?"
              " --no-renames --renames -z --ahead-behind --no-ahead-behind --show-stash"
              " --column=? --no-column",
    "log": _GIT_LOGLIKE,
    "show": _GIT_LOGLIKE + " --no-patch --show-signature",
    "diff": _GIT_DIFFLIKE,
    "blame": "-L: -l -t -s -e -w -p --porcelain --line-porcelain --incremental -M -C"
             " --date= --show-name --show-number --show-email --root --reverse --first-parent"
             " -c --abbrev=?",
    "shortlog": "-s -n -e -c --summary --numbered --email --committer --all --group=",
    "describe": "--tags --all --long --abbrev=? --always --dirty=? --exact-match --contains"
                " --first-parent --match= --exclude=",
    "rev-parse": "--short=? --abbrev-ref=? --show-toplevel --show-prefix --show-cdup"
                 " --git-dir --git-common-dir --is-inside-work-tree --is-bare-repository"
                 " --verify --symbolic-full-name --all --branches --tags --absolute-git-dir"
                 " --show-superproject-working-tree --quiet -q",
    "ls-files": "-c -d -m -o -i -s -u -k -t -v -z --cached --deleted --modified --others"
                " --ignored --stage --unmerged --killed --exclude-standard --full-name"
                " --directory --no-empty-directory --error-unmatch --exclude= -x:"
                " --recurse-submodules",
    "ls-tree": "-r -d -t -l -z --name-only --name-status --full-name --full-tree --long"
               " --abbrev=?",
    "branch": "-a -r -v -vv -l --list --all --remotes --show-current --merged=? --no-merged=?"
              " --contains=? --no-contains=? --sort= --format= --points-at= --column=?"
              " --no-column -i --ignore-case --track=? --no-track",
    "tag": "-l --list -n --sort= --contains= --no-contains= --merged= --no-merged="
           " --points-at= --format= --column=? -i --ignore-case -a --annotate -m: --message=",
    "remote": "-v --verbose",
    "stash": "-u --include-untracked -k --keep-index -m: --message= -p --patch --stat"
             " --index -a --all",
    "add": "-A --all -u --update -n --dry-run -v -f --force -N --intent-to-add"
           " --ignore-errors --renormalize --no-all --ignore-removal",
    "commit": "-m: --message= -a --all -s --signoff --amend --no-edit --allow-empty"
              " --allow-empty-message -F: --file= --author= --date= --fixup= --squash="
              " --no-verify -n --only -o --include -i --reset-author --dry-run --short"
              " --porcelain --status --no-status --cleanup= --trailer= -S? --gpg-sign=?"
              " --no-gpg-sign",
    "checkout": "-b: -B: -f --force --detach -t --track=? --no-track -m --merge --orphan="
                " --ours --theirs -p --patch --ignore-other-worktrees --progress --no-progress",
    "switch": "-c: -C: --create= --force-create= -d --detach -f --force --discard-changes"
              " -t --track=? --no-track --guess --no-guess -m --merge --orphan= --progress"
              " --no-progress",
    "restore": "-s: --source= -S --staged -W --worktree --ours --theirs -m --merge -p"
               " --patch --ignore-unmerged --overlay --no-overlay --progress",
    "reset": "--soft --mixed --hard --merge --keep -p --patch -N --intent-to-add",
    "rm": "-r -f --force --cached -n --dry-run --ignore-unmatch --sparse",
    "mv": "-f --force -k -n --dry-run",
    "init": "-b: --initial-branch= --bare --shared=? --object-format=",
    "fetch": "--all -p --prune -P --prune-tags -t --tags --no-tags --depth= --shallow-since="
             " --unshallow --dry-run --force -f --progress --no-progress --recurse-submodules=?"
             " --no-recurse-submodules -j: --jobs=",
    "pull": "--rebase=? --no-rebase --ff --no-ff --ff-only --all -p --prune --tags --no-tags"
            " --depth= --autostash --no-autostash --progress --no-progress --no-edit"
            " --no-recurse-submodules --squash --no-squash --no-verify --no-stat --stat",
    "push": "-u --set-upstream --tags --follow-tags --dry-run -n --all --porcelain --progress"
            " --no-progress --no-verify --atomic",
    "clone": "--depth= --branch= -b: --single-branch --no-single-branch --no-tags"
             " --shallow-since= --bare --mirror --origin= -o: --progress --no-progress"
             " --recurse-submodules=? --no-checkout -n --filter= --sparse -l --local"
             " --no-hardlinks -s --shared --jobs= -j:",
    "merge": "--no-ff --ff --ff-only --squash --no-squash --no-commit --commit --abort"
             " --continue --quit -m: --message= --no-edit --edit --stat -n --no-stat"
             " --no-verify --allow-unrelated-histories --log=? --no-log",
    "rebase": "--continue --abort --skip --quit --onto= --autosquash --no-autosquash"
              " --autostash --no-autostash --no-verify --keep-base --rebase-merges=?"
              " --no-rebase-merges --update-refs --no-update-refs -q --quiet --stat"
              " --committer-date-is-author-date --ignore-date --fork-point --no-fork-point",
    "cherry-pick": "--continue --abort --skip --quit -n --no-commit -x --edit --no-edit"
                   " -m: --mainline= -s --signoff --allow-empty --ff",
    "revert": "--continue --abort --skip --quit -n --no-commit --no-edit -m: --mainline="
              " -s --signoff",
    "clean": "-n --dry-run -f --force -d -x -X -e: --exclude= -q --quiet",
    "grep": "-i -v -n -l -L -c -w -h -H -E -F -G -P -e: -f: --cached --untracked"
            " --no-index --ignore-case --invert-match --line-number --files-with-matches"
            " --name-only --files-without-match --count --word-regexp --extended-regexp"
            " --fixed-strings --basic-regexp --perl-regexp --and --or --not --all-match"
            " -A: -B: -C: --after-context= --before-context= --context= --heading --break"
            " --full-name --max-depth= -r --recursive --no-recursive -I -a --text -o"
            " --only-matching --column --show-function -p -W --function-context"
            " -m: --max-count= --threads=",
    "worktree": "",
    "version": "",
    "help": "-a --all",
    "count-objects": "-v -H --human-readable",
    "fsck": "--full --strict --no-dangling --connectivity-only --lost-found",
    "reflog": "--all --date= -n:",
    "cat-file": "-t -s -e -p --batch-check=? --batch-all-objects",
    "for-each-ref": "--format= --sort= --count= --contains= --merged= --no-merged="
                    " --points-at=",
    "name-rev": "--name-only --tags --all --refs=",
    "merge-base": "--all --is-ancestor --fork-point --octopus --independent",
    "show-ref": "--head --heads --tags -d --dereference -s --hash=? --verify --abbrev=?",
    "range-diff": "",
    "whatchanged": _GIT_LOGLIKE,
}  # fmt: skip

_PYTEST = _spec(
    "-q -v -x -s -l -r: -k: -m: -n: --quiet --verbose --exitfirst --capture= --tb= --lf"
    " --last-failed --ff --failed-first --nf --new-first --sw --stepwise --co --collect-only"
    " --no-header --no-summary --maxfail= --durations= --durations-min= --showlocals"
    " --strict-markers --disable-warnings --runxfail --color= --code-highlight="
    " --timeout= --full-trace -W: --pythonwarnings= -vv -rA --import-mode= --deselect="
    " --ignore= --ignore-glob= --count= --randomly-seed= -P: --no-cov --cov=? --cov-report="
    " --setup-show --fixtures --markers" + _HELP
)
_NPM_SCRIPT = _spec("--silent -s --workspaces --if-present --ignore-scripts" + _HELP)
_NPM = Program(
    subcommands={
        "test": _NPM_SCRIPT,
        "t": _NPM_SCRIPT,
        "start": _NPM_SCRIPT,
        "run": _NPM_SCRIPT,
        "run-script": _NPM_SCRIPT,
        "install": _spec("-D --save-dev -E --save-exact --no-save --production --omit="
                         " --include= --no-audit --no-fund --legacy-peer-deps --prefer-offline"
                         " --ignore-scripts --dry-run --silent" + _HELP),
        "i": _spec("-D --save-dev -E --save-exact --no-save --no-audit --no-fund"
                   " --legacy-peer-deps --ignore-scripts --silent" + _HELP),
        "ci": _spec("--omit= --include= --no-audit --no-fund --legacy-peer-deps"
                    " --ignore-scripts --prefer-offline --silent" + _HELP),
        "ls": _spec("--all -a --depth= --json --long -l --prod --dev --omit=" + _HELP),
        "list": _spec("--all -a --depth= --json --long -l" + _HELP),
        "outdated": _spec("--all -a --json --long -l" + _HELP),
        "view": _spec("--json" + _HELP),
        "audit": _spec("--json --omit= --audit-level=" + _HELP),
        "version": _spec("--json"),
        "--version": _spec(),
    }
)
_CARGO_BUILD = (
    "-q -v -vv --quiet --verbose --release -r -p: --package= --workspace --all --lib --bins"
    " --bin= --tests --test= --examples --example= --benches --bench= --all-targets"
    " --features= -F: --all-features --no-default-features --target= --profile= -j: --jobs="
    " --locked --frozen --offline --message-format= --keep-going --no-fail-fast --doc"
    " --no-run --color=" + _HELP
)
_CARGO = Program(
    subcommands={
        name: _spec(_CARGO_BUILD)
        for name in ("build", "b", "check", "c", "test", "t", "run", "r", "bench", "doc",
                     "clippy", "fmt", "tree", "metadata", "clean")
    }
)  # fmt: skip
_GO_BUILD = _spec(
    "-v -race -cover -short -count= -run= -bench= -benchmem -timeout= -tags= -trimpath"
    " -failfast -json -x -n -p= -mod= -covermode= -coverprofile= -cpu= -parallel=" + _HELP
)
_GO = Program(
    subcommands={
        "build": _GO_BUILD, "test": _GO_BUILD, "run": _GO_BUILD, "vet": _GO_BUILD,
        "fmt": _spec("-n -x"), "version": _spec(), "env": _spec("-json"),
        "list": _spec("-m -json -f= -u"), "mod": Program(subcommands={
            "tidy": _spec("-v"), "download": _spec("-x -json"), "verify": _spec(),
            "graph": _spec(), "why": _spec("-m -vendor")}),
    }
)  # fmt: skip
_MAKE = _spec(
    "-j? -k -s -n -B -q -i -w -r -R --jobs=? --keep-going --silent --quiet --dry-run"
    " --just-print --always-make --question --ignore-errors --print-directory"
    " --no-print-directory --no-builtin-rules --no-builtin-variables --output-sync=? -O?"
    + _HELP,
    assignments_run=True,
)
_PY_TOOLS: dict[str, Program] = {
    "pytest": _PYTEST,
    "py.test": _PYTEST,
    "ruff": Program(subcommands={
        "check": _spec("--fix --no-fix --diff --statistics --show-fixes --unsafe-fixes"
                       " --watch -q -s --quiet --silent --output-format= --select="
                       " --ignore= --extend-select= --exit-zero --no-cache" + _HELP),
        "format": _spec("--check --diff -q --quiet --no-cache" + _HELP),
    }),
    "mypy": _spec("--strict --ignore-missing-imports --no-incremental --show-error-codes"
                  " --pretty --no-error-summary --show-column-numbers --python-version="
                  " --follow-imports= --check-untyped-defs --warn-unused-ignores -p: -m:"
                  " --package= --module=" + _HELP),
    "black": _spec("--check --diff -q -v --fast --line-length= -l: --target-version="
                   " --skip-string-normalization -S --preview" + _COLOR + _HELP),
    "isort": _spec("--check-only -c --diff --profile= -q" + _HELP),
    "tsc": _spec("--noEmit --watch -w --pretty --incremental --build -b -p: --project="
                 " --strict --listFiles" + _HELP),
}  # fmt: skip

#: Interpreters whose program is a script file (or -c/-m/-e text): a rule includes it; the
#: options before it must be on the list below.
_INTERPRETER_OPTIONS: dict[str, Program] = {
    **dict.fromkeys(
        ("python", "python3", "python2", "pypy", "pypy3"),
        _spec("-u -B -O -OO -I -E -s -S -q -b -bb -v -W: -X:"),
    ),
    **dict.fromkeys(
        ("node", "nodejs"),
        _spec("--enable-source-maps --no-warnings --trace-warnings --trace-uncaught"
              " --max-old-space-size= --stack-size= --no-deprecation --trace-deprecation"),
    ),
    "ruby": _spec("-w -W -v -d"),
    "perl": _spec("-w -W -X -t -T -s"),
    **dict.fromkeys(("bash", "sh", "dash", "zsh"), _spec("-e -u -x -v -o:")),
}  # fmt: skip
#: The options giving an interpreter its program as text or a module name.
_INLINE = {
    **dict.fromkeys(("python", "python3", "python2", "pypy", "pypy3"), ("-c", "-m")),
    **dict.fromkeys(("node", "nodejs"), ("-e", "--eval", "-p", "--print")),
    "ruby": ("-e",),
    "perl": ("-e", "-E"),
    **dict.fromkeys(("bash", "sh", "dash", "zsh"), ("-c",)),
}

#: Programs that exist to run another program (the parser unwraps them; a rule names the
#: program they run).
WRAPPERS = frozenset(
    {
        "env", "xargs", "nice", "nohup", "timeout", "time", "stdbuf", "command", "exec",
        "builtin", "setsid", "ionice", "chrt", "taskset", "flock", "watch", "unbuffer",
        "caffeinate", "busybox", "coproc", "sudo", "doas", "su", "pkexec", "run0", "runuser",
        "parallel", "strace", "ltrace", "valgrind", "script", "faketime", "firejail",
    }
)  # fmt: skip
#: Programs that read their program from their input or run commands they are given in
#: other ways (`.shell` in sqlite3, `!` in ed, pagers and editors): never a rule without
#: the whole command, and not at all when the program comes from input.
SCRIPT_RUNNERS = frozenset(
    {
        "ed", "red", "ex", "vi", "vim", "nvim", "view", "vimdiff", "nano", "emacs", "pico",
        "gdb", "lldb", "sqlite3", "dc", "bc", "less", "more", "most", "man", "psql", "mysql",
        "mongo", "mongosh", "redis-cli", "lua", "luajit", "php", "tclsh", "wish", "Rscript",
        "R", "julia", "osascript", "pwsh", "expect", "m4", "jshell", "irb",
        "ghci", "guile", "racket", "sbcl", "ocaml", "swipl", "scheme", "deno", "bun", "tsx",
        "ts-node", "npx", "pnpx", "bunx", "awk", "gawk", "mawk", "nawk", "sed", "find",
        "python", "python3", "python2", "pypy", "pypy3", "node", "nodejs", "ruby", "perl",
        "bash", "sh", "dash", "zsh", "ksh", "fish",
    }
)  # fmt: skip
#: Of those, programs that read their program from their input when it is not an argument.
_INPUT_PROGRAMS = frozenset({"ed", "red", "ex", "gdb", "lldb", "dc", "bc", "m4", "expect"})


def known(program: str) -> bool:
    """Deskhand knows this program's options (prefix rules may cover it)."""
    return _lookup(program) is not None


def _lookup(program: str) -> Program | None:
    name = program.rsplit("/", 1)[-1]
    if "/" in program:
        return None  # ./build.sh, /opt/x/bin/ls: not the program Deskhand knows by name
    if name in _SIMPLE:
        return _SIMPLE[name]
    if name in _SCRIPTED:
        return _SCRIPTED[name]
    if name in _PY_TOOLS:
        return _PY_TOOLS[name]
    if name == "git":
        return Program(subcommands={k: _spec(v + _GIT_COMMON) for k, v in _GIT.items()})
    if name in ("npm",):
        return _NPM
    if name == "cargo":
        return _CARGO
    if name == "go":
        return _GO
    if name in ("make", "gmake"):
        return _MAKE
    return None


#: Programs that only read and print, whatever their known-inert options: with no sandbox
#: (macOS without sandbox-exec, Windows, a Linux without user namespaces) only commands of
#: these, every option known, may be covered by a rule. git is not one: a repository's
#: config can make `git status` run a program.
READ_ONLY = frozenset(
    {
        "ls", "dir", "cat", "tac", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg",
        "find", "sort", "uniq", "cut", "tr", "diff", "cmp", "comm", "basename", "dirname",
        "realpath", "readlink", "pwd", "echo", "printf", "true", "false", "date", "whoami",
        "id", "uname", "which", "stat", "file", "du", "df", "tree", "nl", "od", "hexdump",
        "md5sum", "sha1sum", "sha256sum", "sha512sum", "base64", "column", "fold", "paste",
        "join", "seq", "sleep", "test", "[", "[[", "jq", "cd", "pushd",
    }
)  # fmt: skip


def known_read_only(words: Sequence[str]) -> bool:
    """The program only reads and prints, and every option it is given is known (so no
    sandbox is needed for a rule to cover it)."""
    if not words or "/" in words[0] or words[0] not in READ_ONLY:
        return False
    if words[0] == "date" and not _date_reads_only(words):
        return False  # `date 0101…` sets the clock
    return 1 in coverage(words, 1).lengths


def _date_reads_only(words: Sequence[str]) -> bool:
    """date prints unless given an operand that is not +FORMAT (that sets the clock)."""
    skip = False
    for word in words[1:]:
        if skip:
            skip = False
        elif word in ("-d", "-r", "--date", "--reference"):
            skip = True
        elif not word.startswith(("-", "+")):
            return False
    return True


def reads_program_from_input(words: Sequence[str]) -> bool:
    """ed, gdb, dc…: their commands (which may run a shell) come from their input; sqlite3
    without SQL on the command line reads it from input (`.shell` runs a command)."""
    if not words:
        return False
    name = words[0].rsplit("/", 1)[-1]
    if name in _INPUT_PROGRAMS:
        return True
    if name == "sqlite3":
        operands = [w for w in words[1:] if not w.startswith("-")]
        return len(operands) < 2
    return False


@dataclass(frozen=True)
class Coverage:
    """Which rule prefixes may cover a command: its words[:k] for each k in `lengths`."""

    lengths: tuple[int, ...]
    #: What "Always allow" proposes: a prefix length in `lengths`, and whether that rule is
    #: for exactly this command.
    proposal: int
    exact: bool


def coverage(words: Sequence[str], suggested: int) -> Coverage:
    """The prefix lengths a rule may have to cover `words` (every word after the prefix is
    an operand or a known-inert option), and the proposal: `suggested` words when allowed,
    else the exact command."""
    words = list(words)
    full = len(words)
    minimum, start, spec = _layout(words)
    if spec is None or minimum is None:
        return Coverage((full,), full, True)
    last_bad = _last_non_inert(words, start, spec, words[0].rsplit("/", 1)[-1])
    low = max(minimum, last_bad)
    lengths = tuple(range(low, full + 1)) if low <= full else (full,)
    if suggested in lengths:
        # the whole command, when more than the program (its subcommand, its script): a
        # rule for exactly what the user saw
        return Coverage(lengths, suggested, suggested == full and full > minimum)
    return Coverage(lengths, full, True)  # the prefix it would suggest may not cover it


def _layout(words: list[str]) -> tuple[int | None, int, Program | None]:
    """(the shortest prefix a rule may be, where options start, the spec for them); None
    when only the exact command may be covered."""
    if not words:
        return None, 0, None
    program = words[0]
    name = program.rsplit("/", 1)[-1]
    if "/" not in program and name in _INTERPRETER_OPTIONS:
        return _interpreter_layout(words, name)
    spec = _lookup(program)
    if spec is None:
        return None, 0, None
    index = 1
    while spec.subcommands:
        if index >= len(words) or words[index] not in spec.subcommands:
            return None, 0, None
        spec = spec.subcommands[words[index]]
        index += 1
    if spec.script:
        script = _script_index(words, index, spec)
        if script is None:
            return None, 0, None
        return script + 1, script + 1, spec
    return index, index, spec


def _interpreter_layout(words: list[str], name: str) -> tuple[int | None, int, Program | None]:
    """python build.py ARGS, python -m pytest ARGS, python -c CODE: the rule includes the
    script (or module, or code); what follows is the script's business only when it holds
    operands alone (`python -m pytest` follows pytest's own list)."""
    spec = _INTERPRETER_OPTIONS[name]
    inline = _INLINE.get(name, ())
    index = 1
    while index < len(words):
        word = words[index]
        if word in inline:
            if index + 1 >= len(words):
                return None, 0, None
            end = index + 2
            if word == "-m" and words[index + 1] in _PY_TOOLS:
                inner = _PY_TOOLS[words[index + 1]]
                if not inner.subcommands:
                    return end, end, inner
            return end, end, Program()
        if word == "--" or not word.startswith("-"):
            script = index + 1 if word != "--" else index + 2
            if script > len(words):
                return None, 0, None
            return script, script, Program()
        step = _option_width(word, words, index, spec)
        if step is None:
            return None, 0, None
        index += step
    return None, 0, None  # no script: the program comes from its input


def _script_index(words: list[str], start: int, spec: Program) -> int | None:
    """Where an awk or sed program text is: its first operand (None with -e/-f or none)."""
    index = start
    while index < len(words):
        word = words[index]
        if word == "--":
            return index + 1 if index + 1 < len(words) else None
        if word.startswith("-") and word != "-":
            step = _option_width(word, words, index, spec)
            if step is None:
                return None
            index += step
            continue
        return index
    return None


def _last_non_inert(words: list[str], start: int, spec: Program, name: str) -> int:
    """The index just after the last word that is not an operand or a known-inert option
    (with its value); `start` when there is none."""
    if name == "find":
        return _find_last_non_inert(words, start)
    last = index = start
    operands = 0
    operands_only = False
    while index < len(words):
        word = words[index]
        if spec.bundled and index == start and word and not word.startswith("-"):
            step = _bundle_width(word, words, index, spec)
            if step is None:
                return len(words)  # an unknown letter may take any of the words after it
            index += step
            continue
        if spec.assignments_run and "=" in word and not word.startswith("-"):
            last = index + 1  # make reads NAME=value operands, even after `--`
        elif word == "--" and not operands_only:
            operands_only = True
        elif operands_only or not word.startswith(("-", "+")) or word == "-":
            operands += 1
            if spec.max_operands is not None and operands > spec.max_operands:
                last = index + 1  # `uniq IN OUT`, `xxd IN OUT`: the extra one is written
        elif word.startswith("+"):
            if not spec.plus_operand:
                last = index + 1
        else:
            step = _option_width(word, words, index, spec)
            if step is None:
                # not known to be inert: a rule must include it and whatever value it may
                # take (the next word, unless the value is attached with '=')
                attached = word.startswith("--") and "=" in word
                last = min(len(words), index + (1 if attached else 2))
                step = 1
            index += step
            continue
        index += 1
    return last


def _find_last_non_inert(words: list[str], start: int) -> int:
    """find: leading -L/-P/-H, starting points, then an expression of primaries; only the
    primaries that test or print are inert (never -exec, -delete, -fprint…)."""
    for word in words[start:]:
        if word.startswith("-") and word not in FIND_INERT and word not in ("-L", "-P", "-H"):
            return len(words)  # what follows may be its command (-exec rm {} ;)
    return start


def _option_width(word: str, words: list[str], index: int, spec: Program) -> int | None:
    """How many words a known-inert option takes (1 or 2), None when it is not one."""
    name, equals, _ = word.partition("=")
    if name in spec.long_flags and not equals:
        return 1
    if name in spec.long_optional:
        return 1
    if name in spec.long_valued:
        return 1 if equals else (2 if index + 1 < len(words) else None)
    if word.startswith("--"):
        return None  # abbreviations and options not on the list
    if spec.digits and word[1:].isdigit():
        return 1
    return _cluster_width(word, words, index, spec)


def _cluster_width(word: str, words: list[str], index: int, spec: Program) -> int | None:
    letters = word[1:]
    if not letters:
        return None
    for position, letter in enumerate(letters):
        if letter in spec.optional:
            return 1  # -j or -j4: a value only when attached
        if letter in spec.valued:
            if position + 1 < len(letters):
                return 1  # -n5: the value is attached
            return 2 if index + 1 < len(words) else None
        if letter not in spec.flags:
            return None
    return 1


def _bundle_width(word: str, words: list[str], index: int, spec: Program) -> int | None:
    """Old-style letters (`tar tfI a.tar prog`): each letter taking a value takes the next
    word in turn; None when a letter is not known to be inert."""
    taken = 0
    for letter in word:
        if letter in spec.valued:
            taken += 1
        elif letter not in spec.flags:
            return None
    return 1 + taken if index + taken < len(words) else None


def profile_problem(prefix: str) -> str | None:
    """Why a scheduled task's profile may not name this command prefix (None: it may).

    A run nobody watches must never get a rule that lets it run whatever program text it
    likes: an interpreter or a program that runs others must come with its whole script,
    a program with subcommands with one of them."""
    try:
        words = shlex.split(prefix)
    except ValueError:
        return f"“{prefix}” is not a command Deskhand can read (check the quotes)"
    if not words:
        return "name a command after command="
    name = words[0].rsplit("/", 1)[-1]
    if name in WRAPPERS:
        return (
            f"{name} only runs another program: name that program instead "
            f"(e.g. command=git status rather than command={name} …)"
        )
    if reads_program_from_input(words):
        return f"{name} reads the commands it runs from its input: no rule can cover it"
    spec = _lookup(words[0])
    if spec is not None and spec.subcommands:
        level = spec
        for word in words[1:]:
            if not level.subcommands:
                break
            if word not in level.subcommands:
                level = Program()
                break
            level = level.subcommands[word]
        if level.subcommands or (level == Program() and len(words) < 2):
            names = ", ".join(sorted(spec.subcommands)[:8])
            return f"name what {name} should do too (one of: {names}…), not “{prefix}” alone"
    cover = coverage(words, len(words))
    if name in SCRIPT_RUNNERS and len(words) == 1:
        return (
            f"{name} runs the program text it is given, so a rule for “{name}” alone would "
            "let a run execute anything: write the whole command, with its script"
        )
    if len(words) < min(cover.lengths):
        return (
            f"“{prefix}” is too short to be safe: {name} needs its "
            + ("subcommand" if _has_subcommands(name) else "script")
            + " in the rule"
        )
    return None


def _has_subcommands(name: str) -> bool:
    spec = _lookup(name)
    return spec is not None and bool(spec.subcommands)
