"""The confined shell's syntax: a command line read into words and operators.

Runs inside the guest (and natively in the tests). It reads the part of the POSIX
shell language that notebooks use after `!`: words with quotes and escapes, `$VAR`,
`${VAR}`, `$?`, `$(...)` and backquotes, `~`, the operators `|`, `&&`, `||`, `;`, and
the redirections `<`, `>`, `>>`, `2>`, `2>>`, `2>&1`, `>&2`, `&>`. Anything else a shell
would take (functions, subshells, `&`, here-documents, arithmetic) is a SyntaxError
with one line that says what is not available; nothing here runs anything.
"""

from dataclasses import dataclass, field

# Word parts: what each piece of a word is, so that expansion knows what to glob
# and split. ("lit", text, quoted) | ("var", name, quoted) | ("cmd", source, quoted)
Part = tuple


class ShellSyntaxError(Exception):
    """A command line the confined shell cannot read; the message is dash's shape."""


@dataclass
class Redirect:
    fd: int  # 0, 1 or 2 (1 and 2 together for &>)
    op: str  # "<", ">", ">>", ">&" (dup), "&>"
    target: list = field(default_factory=list)  # a word's parts, or [] for a dup
    dup: int = -1  # for ">&": the descriptor duplicated


@dataclass
class Command:
    words: list = field(default_factory=list)  # each a list of parts
    assignments: list = field(default_factory=list)  # (name, parts)
    redirects: list = field(default_factory=list)


@dataclass
class Pipeline:
    commands: list
    negate: bool = False


@dataclass
class AndOr:
    first: Pipeline
    rest: list = field(default_factory=list)  # (op, Pipeline) with op "&&" or "||"


def _not_here(what):
    return ShellSyntaxError(f"{what} are not available in this sandbox's shell")


_SPECIAL_VARS = "?$#0123456789!@*-"
_OPERATORS = ("&&", "||", ";;", "|", ";", "&", "(", ")")


class _Reader:
    def __init__(self, text):
        self.s = text
        self.i = 0

    def peek(self, n=1):
        return self.s[self.i:self.i + n]

    def at_end(self):
        return self.i >= len(self.s)


def tokenize(text):
    """The tokens of `text`: ("word", parts), ("op", text) or ("redir", Redirect)."""
    r = _Reader(text)
    tokens = []
    while True:
        while not r.at_end() and r.peek() in " \t\n":
            if r.peek() == "\n":
                tokens.append(("op", "\n"))
            r.i += 1
        if r.at_end():
            return tokens
        c = r.peek()
        if c == "#":  # a comment runs to the end of the line
            while not r.at_end() and r.peek() != "\n":
                r.i += 1
            continue
        redirect = _read_redirect(r)
        if redirect is not None:
            tokens.append(("redir", redirect))
            continue
        for op in _OPERATORS:
            if r.s.startswith(op, r.i):
                if op == "&":
                    raise _not_here("background jobs (&)")
                if op in ("(", ")"):
                    raise _not_here("subshells and functions")
                if op == ";;":
                    raise _not_here("case statements")
                tokens.append(("op", op))
                r.i += len(op)
                break
        else:
            tokens.append(("word", _read_word(r)))


def _read_redirect(r):
    s, i = r.s, r.i
    fd = None
    if s[i:i + 2] == "&>":
        r.i += 2 + (s[i + 2:i + 3] == ">")
        return _redirect_target(r, Redirect(3, "&>" if s[i + 2:i + 3] != ">" else "&>>"))
    if s[i].isdigit() and s[i + 1:i + 2] in ("<", ">"):
        fd = int(s[i])
        i += 1
    if s[i:i + 1] not in ("<", ">"):
        return None
    if s[i:i + 2] == "<<":
        raise _not_here("here-documents (<<)")
    if s[i:i + 2] == "<(" or s[i:i + 2] == ">(":
        raise _not_here("process substitutions")
    if s[i] == "<":
        r.i = i + 1
        return _redirect_target(r, Redirect(0 if fd is None else fd, "<"))
    fd = 1 if fd is None else fd
    if s[i:i + 2] == ">&":
        j = i + 2
        if s[j:j + 1] in ("1", "2") and (j + 1 >= len(s) or s[j + 1] in " \t\n;|&<>"):
            r.i = j + 1
            return Redirect(fd, ">&", dup=int(s[j]))
        raise ShellSyntaxError(f"{s[i:j + 1].strip() or '>&'}: only 2>&1 and >&2 are available in this sandbox's shell")
    op = ">>" if s[i:i + 2] == ">>" else ">"
    r.i = i + len(op) + (s[i + len(op):i + len(op) + 1] == "|")  # >| is > here (no noclobber)
    return _redirect_target(r, Redirect(fd, op))


def _redirect_target(r, redirect):
    while not r.at_end() and r.peek() in " \t":
        r.i += 1
    if r.at_end() or r.peek() in "\n;|&<>()":
        raise ShellSyntaxError("Syntax error: redirection without a file name")
    redirect.target = _read_word(r)
    return redirect


def _read_word(r):
    parts = []
    buf = []

    def flush(quoted):
        if buf:
            parts.append(("lit", "".join(buf), quoted))
            buf.clear()

    # Tilde at the start of a word: the guest's home, as sh expands it.
    if r.peek() == "~" and (r.i + 1 >= len(r.s) or r.s[r.i + 1] in "/ \t\n;|&<>"):
        parts.append(("var", "HOME", True))
        r.i += 1
    while not r.at_end():
        c = r.peek()
        if c in " \t\n;|&<>()":
            break
        if c == "\\":
            flush(False)
            r.i += 1
            if not r.at_end():
                if r.peek() != "\n":
                    parts.append(("lit", r.peek(), True))
                r.i += 1
            continue
        if c == "'":
            flush(False)
            end = r.s.find("'", r.i + 1)
            if end < 0:
                raise ShellSyntaxError("Syntax error: Unterminated quoted string")
            parts.append(("lit", r.s[r.i + 1:end], True))
            r.i = end + 1
            continue
        if c == '"':
            flush(False)
            r.i += 1
            parts.extend(_read_double_quoted(r))
            continue
        if c == "$" or c == "`":
            part = _read_dollar(r, False)
            if part is not None:
                flush(False)
                parts.append(part)
                continue
        buf.append(c)
        r.i += 1
    flush(False)
    return parts


def _read_double_quoted(r):
    parts = []
    buf = []
    while True:
        if r.at_end():
            raise ShellSyntaxError("Syntax error: Unterminated quoted string")
        c = r.peek()
        if c == '"':
            r.i += 1
            break
        if c == "\\" and r.peek(2)[1:] in ('"', "\\", "$", "`", "\n"):
            if r.peek(2)[1:] != "\n":
                buf.append(r.peek(2)[1])
            r.i += 2
            continue
        if c in "$`":
            part = _read_dollar(r, True)
            if part is not None:
                if buf:
                    parts.append(("lit", "".join(buf), True))
                    buf = []
                parts.append(part)
                continue
        buf.append(c)
        r.i += 1
    if buf or not parts:
        parts.append(("lit", "".join(buf), True))  # "" is an empty word, not no word
    return parts


def _read_dollar(r, quoted):
    """A $-expansion or backquote at r.i, or None for a literal `$`."""
    s, i = r.s, r.i
    if s[i] == "`":
        end = s.find("`", i + 1)
        if end < 0:
            raise ShellSyntaxError("Syntax error: EOF in backquote substitution")
        r.i = end + 1
        return ("cmd", s[i + 1:end], quoted)
    nxt = s[i + 1:i + 2]
    if nxt == "(":
        if s[i + 2:i + 3] == "(":
            raise _not_here("arithmetic expansions $((...))")
        depth, j = 1, i + 2
        while j < len(s) and depth:
            if s[j] == "(":
                depth += 1
            elif s[j] == ")":
                depth -= 1
            elif s[j] in "'\"":
                close = s.find(s[j], j + 1)
                j = close if close > 0 else len(s)
            j += 1
        if depth:
            raise ShellSyntaxError("Syntax error: end of file unexpected (expecting \")\")")
        r.i = j
        return ("cmd", s[i + 2:j - 1], quoted)
    if nxt == "{":
        end = s.find("}", i + 2)
        if end < 0:
            raise ShellSyntaxError("Syntax error: Missing '}'")
        name = s[i + 2:end]
        if not (name.isidentifier() or name in _SPECIAL_VARS and len(name) == 1):
            raise _not_here(f"parameter expansions such as ${{{name}}}")
        r.i = end + 1
        return ("var", name, quoted)
    if nxt and nxt in _SPECIAL_VARS:
        r.i = i + 2
        return ("var", nxt, quoted)
    j = i + 1
    while j < len(s) and (s[j].isalnum() or s[j] == "_"):
        j += 1
    if j == i + 1 or s[i + 1].isdigit():
        return None  # a lone $ is itself
    r.i = j
    return ("var", s[i + 1:j], quoted)


def parse(text):
    """The command line `text` as a list of AndOr lists, run one after the other."""
    tokens = tokenize(text)
    lists = []
    pos = 0

    def command():
        nonlocal pos
        cmd = Command()
        while pos < len(tokens) and tokens[pos][0] != "op":
            kind, value = tokens[pos]
            if kind == "redir":
                cmd.redirects.append(value)
            elif not cmd.words and _assignment(value) is not None:
                cmd.assignments.append(_assignment(value))
            else:
                cmd.words.append(value)
            pos += 1
        if not cmd.words and not cmd.assignments and not cmd.redirects:
            found = tokens[pos][1] if pos < len(tokens) else "end of file"
            raise ShellSyntaxError(f"Syntax error: \"{found}\" unexpected")
        return cmd

    def skip_newlines():
        nonlocal pos
        while pos < len(tokens) and tokens[pos] == ("op", "\n"):
            pos += 1

    def pipeline():
        nonlocal pos
        skip_newlines()
        negate = False
        if pos < len(tokens) and tokens[pos][0] == "word" and tokens[pos][1] == [("lit", "!", False)]:
            negate = True
            pos += 1
        commands = [command()]
        while pos < len(tokens) and tokens[pos] == ("op", "|"):
            pos += 1
            skip_newlines()
            commands.append(command())
        return Pipeline(commands, negate)

    while pos < len(tokens):
        if tokens[pos] in (("op", ";"), ("op", "\n")):
            if tokens[pos] == ("op", ";") and (not lists or tokens[pos - 1][0] == "op"):
                raise ShellSyntaxError('Syntax error: ";" unexpected')
            pos += 1
            continue
        item = AndOr(pipeline())
        while pos < len(tokens) and tokens[pos][0] == "op" and tokens[pos][1] in ("&&", "||"):
            op = tokens[pos][1]
            pos += 1
            item.rest.append((op, pipeline()))
        lists.append(item)
        if pos < len(tokens) and tokens[pos] not in (("op", ";"), ("op", "\n")):
            raise ShellSyntaxError(f"Syntax error: \"{tokens[pos][1]}\" unexpected")
    return lists


def _assignment(parts):
    """(name, value parts) if the word is NAME=value, else None."""
    if not parts or parts[0][0] != "lit" or parts[0][2]:
        return None
    text = parts[0][1]
    name, eq, rest = text.partition("=")
    if not eq or not name.isidentifier():
        return None
    value = ([("lit", rest, False)] if rest else []) + list(parts[1:])
    return name, value
