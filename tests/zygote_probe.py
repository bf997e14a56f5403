"""What a `python -m tests.zygote_probe [sleep]` process sees, as JSON on stdout (tests/test_zygote.py compares a
zygote child's with a new interpreter's); with `sleep`, it then waits for a signal; else a
thread that is not a daemon prints a last line as the process exits."""

import json
import os
import signal
import sys
import threading
import time
import warnings

if __name__ == "__main__":
    warnings.warn("a warning a new interpreter prints", UserWarning, stacklevel=1)
    seen = {
        "argv": sys.argv[1:],
        "main": sys.argv[0].endswith("zygote_probe.py"),
        "cwd": os.getcwd(),
        "probe_env": os.environ.get("ZYGOTE_PROBE"),
        "handlers": {name: str(signal.getsignal(getattr(signal, name))) for name in ("SIGTERM", "SIGHUP", "SIGPIPE")},
        "sigint_raises": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
        "root_handlers": len(__import__("logging").getLogger().handlers),
        "torch_threads": __import__("torch").get_num_threads(),
        "main_process": __import__("multiprocessing").parent_process() is None,
        "session_leader": os.getsid(0) == os.getpid(),
        "stdin": sys.stdin.read(),
    }
    print(json.dumps(seen), flush=True)
    if sys.argv[1:] == ["sleep"]:
        time.sleep(60)
    # a thread that is not a daemon: the interpreter waits for it on the way out, after SystemExit
    threading.Thread(target=lambda: (time.sleep(0.3), print("the last thread ended", flush=True))).start()
    raise SystemExit(3)
