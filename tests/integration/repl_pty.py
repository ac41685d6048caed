#!/usr/bin/env python3
"""The `corral run` REPL driven through a pseudo-terminal (issue 8), in the C locale:
/set parameter, /show, /list, /set format, multi-line input, a bracketed paste, Ctrl-G's
editor, non-ASCII input, /set system, /save then /load, unknown subcommands, Ctrl-C during a
generation and at the prompt, a vision model /load-ed and given a prompt that starts with an
image's absolute path, /set think on a model that cannot think, /bye, Ctrl-D.
Usage: repl_pty.py CORRAL_BIN MODEL SAVED_MODEL VISION_MODEL IMAGE_PATH. Exits non-zero on the
first failed check. The server (CORRAL_HOST) must be running, MODEL must answer with
temperature 0, and OLLAMA_EDITOR must name a program that appends lines to the file it is
given (cli.test.sh writes one)."""
import os
import pty
import select
import sys
import time

corral, model, saved, vision_model, image = sys.argv[1:6]
pid, master = pty.fork()
if pid == 0:  # the "C" locale, as with no LANG set: non-ASCII input must survive it
    env = {k: v for k, v in os.environ.items()
           if k not in ("LANG", "LANGUAGE") and not k.startswith("LC_")}
    env["LC_ALL"] = "C"
    os.execve(corral, [corral, "run", model, "--nowordwrap"], env)

pending = b""


def fail(message):
    print("FAIL: " + message + "\n--- last output ---\n" + pending.decode(errors="replace"))
    os.kill(pid, 9)
    sys.exit(1)


def read_some():
    """Appends what the REPL writes within 0.1 s to pending: True if anything came, False if
    nothing did, None once the terminal is closed."""
    global pending
    ready, _, _ = select.select([master], [], [], 0.1)
    if not ready:
        return False
    try:
        pending += os.read(master, 65536)
    except OSError:
        return None
    return True


def until_prompt(timeout=60):
    """Everything the REPL wrote up to its next idle '>>> ' prompt: the output ends with one
    and nothing more comes for 0.1 s (the REPL writes nothing after its prompt)."""
    global pending
    end = time.time() + timeout
    while time.time() < end:
        came = read_some()
        if came is None:
            break
        if not came and pending.endswith(b">>> "):
            out, pending = pending, b""
            return out.decode(errors="replace")
    fail("no prompt within %ds" % timeout)


def until_after(mark, n_bytes, timeout=20):
    """Reads until at least n_bytes have come after the last mark in what is pending (the
    pending output is kept for until_prompt)."""
    end = time.time() + timeout
    while time.time() < end:
        at = pending.rfind(mark)
        if at >= 0 and len(pending) - at - len(mark) >= n_bytes:
            return
        if read_some() is None:
            break
    fail("%d bytes after %r within %ds" % (n_bytes, mark, timeout))


def turn(line, expect=None, name=None):
    os.write(master, line.encode() + b"\r")
    out = until_prompt()
    if expect is not None and expect not in out:
        fail("%s: expected %r in %r" % (name or line, expect, out))
    print("ok   " + (name or line.splitlines()[0]))
    return out


until_prompt()
turn("/set parameter num_predict 6", "Set parameter 'num_predict' to '6'")
turn("/set parameter top_k many", "Couldn't set parameter", "/set parameter rejects a bad value")
turn("/set parameter", "num_ctx <int>", "/set parameter alone lists the common parameters")
turn("/set format json", "Set format to 'json' mode.")
turn("/set format xml", "Invalid or missing format", "/set format refuses xml")
turn("/set noformat", "Disabled format.")
turn("/set nonsense", "Unknown command '/set nonsense'", "/set with an unknown word says so")
turn("/show nonsense", "Unknown command '/show nonsense'", "/show with an unknown word says so")
turn("/? shortcut", "Ctrl + d", "/? shortcut")
turn("/list " + model[:4].upper(), model + ":latest", "/list PREFIX")
if model in turn("/list zzz", "NAME", "/list PREFIX leaves out other models"):
    fail("/list zzz listed " + model)
turn("/show parameters", "User defined parameters:\r\n  num_predict                    6",
     "/show parameters lists the user's value, as ollama lays it out")
turn("/show info", "architecture", "/show info")
turn("/show modelfile", "PARAMETER num_predict 6", "/show modelfile has the session's /set parameter")
out = turn('"""\rPrince\rAndrew"""', None, "multi-line input")
if "... " not in out:
    fail("multi-line input: no continuation prompt in %r" % out)
# a bracketed paste of several lines is one message, even when it starts with "/", sent with
# the line typed after it when Enter comes
out = turn("\x1b[200~/set nothing\rPierre\r\x1b[201~Natasha", None, "a pasted block is one message")
if "Unknown command" in out or "... Natasha" not in out:
    fail("a pasted block: %r" % out)
# Ctrl-G: the line goes to the editor (OLLAMA_EDITOR, set by cli.test.sh, adds two lines) and
# comes back to be sent with Enter
os.write(master, b"Natasha\x07")
until_after(b"Pierre", 0)  # the edited line is back
out = turn("", None, "Ctrl-G edits the prompt in OLLAMA_EDITOR")
if "... Pierre" not in out:
    fail("Ctrl-G: %r" % out)
turn("/save " + saved + "-pasted", "Created new model", "/save after a paste")
turn("/set system Наташа, café, 日本 🐎", "Set system message.", "/set system with non-ASCII text")
turn("/show system", "Наташа, café, 日本 🐎", "non-ASCII input survives the C locale")
turn('/set system """You are\rTolstoy."""', "Set system message.", "/set system multi-line")
turn("/show system", "You are\r\nTolstoy.", "/show system shows the session's")
turn("/show modelfile", "You are\r\nTolstoy.", "/show modelfile has the session's /set system")
turn("/set verbose", "Set 'verbose' mode.")
turn("Natasha", "eval rate:", "a chat turn with timing statistics")
turn("/set quiet", "Set 'quiet' mode.")
turn("/save " + saved, "Created new model '%s'" % saved, "/save")
turn("/load " + saved, "Loading model '%s'" % saved, "/load")
turn("/clear", "Cleared session context")
turn("/nonsense", "Unknown command '/nonsense'", "unknown command")
turn("/?", "/set", "/? help")

# Ctrl-C: first cancels a long generation, then at an empty prompt says how to leave
turn("/set parameter num_predict 100000", "Set parameter")
os.write(master, b"Prince Andrew\r")
until_after(b"Prince Andrew", 32)  # the answer has begun
os.write(master, b"\x03")
until_prompt(timeout=20)
print("ok   Ctrl-C cancels a generation")
os.write(master, b"\x03")
if "Use Ctrl + d or /bye to exit." not in until_prompt():
    fail("Ctrl-C at the prompt")
print("ok   Ctrl-C at the prompt")
# a vision model's prompt may start with an image's absolute path: a prompt, not a command
turn("/load " + vision_model, "Loading model '%s'" % vision_model, "/load a vision model")
turn(image + " Describe the picture.", "Added image '%s'" % image,
     "a prompt starting with an image path attaches the image")
turn("/set think", "does not support thinking output", "/set think warns on a model that cannot think")
os.write(master, b"/bye\r")
_, status = os.waitpid(pid, 0)
if status != 0:
    fail("/bye: exit status %d" % status)
print("ok   /bye exits with 0")

def run_to_end(args, keys=None):
    """`corral run` with args in a new pseudo-terminal; keys typed at its first prompt. Its
    output and exit status once it ends."""
    global pid, master
    pid, master = pty.fork()
    if pid == 0:
        os.execv(corral, [corral, "run"] + args)
    if keys is not None:
        until_prompt()
        os.write(master, keys)
    rest = b""
    end = time.time() + 60
    while True:
        ready, _, _ = select.select([master], [], [], max(0, end - time.time()))
        if not ready:
            fail("corral run %s did not end: %r" % (" ".join(args), rest))
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        rest += chunk
    return rest, os.waitpid(pid, 0)[1]


# --think on a model that cannot think fails before the first prompt, as ollama's does
rest, status = run_to_end([model, "--think"])
if status == 0 or b"does not support thinking" not in rest:
    fail("run --think in the chat: exit status %d, output %r" % (status, rest))
print("ok   run --think on a model that cannot think fails at once")

# Ctrl-D on an empty line leaves too, ending the line so the shell's prompt starts afresh
rest, status = run_to_end([model], b"\x04")
if status != 0 or not rest.replace(b"\x1b[?2004l", b"").endswith(b"\n"):
    fail("Ctrl-D: exit status %d, last output %r" % (status, rest))
print("ok   Ctrl-D exits with 0 on a line of its own")
