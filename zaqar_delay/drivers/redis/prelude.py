"""The part of _common.lua that one script needs.

Redis runs a script's whole text on every call, and each ``local
function`` of the shared prelude is a closure made anew each time: about
0.25 us apiece, 14 us for the 55 of _common.lua, a tenth of a delete's
time in Redis. So each script gets the prelude without the functions it
cannot reach. Every statement that is not a function definition (the
generation check, key names, the clock, upvalues) is kept, in order.

Reachability is by name, over the code with its comment lines left out:
a function is kept when its name appears as a word in the script, in a
kept statement, or in a kept function. A name that only appears in a
string or a trailing comment keeps a function it need not; nothing that
is called can be left out, because Lua resolves a call to a local
function by its name, written out at the call.
"""

import re

_FUNCTION = re.compile(r'local function ([A-Za-z_]\w*)\s*\(')
_WORD = re.compile(r'[A-Za-z_]\w*')


def _starts_statement(line):
    return line[:1] not in ('', ' ', '\t', '\n') and \
        not line.startswith('end')


def _is_comment(line):
    return line.lstrip().startswith('--')


def blocks(common):
    """The top-level statements of ``common``, each with the comment
    lines right above it: a list of (name of the local function it
    defines, or None; its text)."""
    found, current = [], []
    for line in common.splitlines(keepends=True):
        opens = _starts_statement(line)  # a comment at column 0 too
        if opens and any(held.strip() and not _is_comment(held)
                         for held in current):
            found.append(current)
            current = []
        current.append(line)
    found.append(current)
    named = []
    for lines in found:
        code = [line for line in lines
                if line.strip() and not _is_comment(line)]
        match = _FUNCTION.match(code[0]) if code else None
        named.append((match.group(1) if match else None, ''.join(lines)))
    return named


def _words(text):
    return set(_WORD.findall(''.join(
        line for line in text.splitlines(keepends=True)
        if not _is_comment(line))))


def for_script(common, body):
    """``common`` without the local functions ``body`` cannot reach."""
    parts = blocks(common)
    functions = {name: text for name, text in parts if name}
    wanted = _words(body)
    for name, text in parts:
        if name is None:
            wanted |= _words(text)
    pending = [name for name in functions if name in wanted]
    kept = set()
    while pending:
        name = pending.pop()
        if name in kept:
            continue
        kept.add(name)
        pending += [word for word in _words(functions[name])
                    if word in functions and word not in kept]
    return ''.join(text for name, text in parts
                   if name is None or name in kept)
