"""What a `python -m tests.forked_probe [sleep]` process sees, as JSON on stdout (tests/test_forked.py compares a
forked child's with a new interpreter's); with `sleep`, it then waits for a signal."""

import json
import os
import signal
import sys
import time
import warnings

if __name__ == "__main__":
    warnings.warn("a warning a new interpreter prints", UserWarning, stacklevel=1)
    seen = {
        "argv": sys.argv[1:],
        "main": sys.argv[0].endswith("forked_probe.py"),
        "cwd": os.getcwd(),
        "probe_env": os.environ.get("FORKED_PROBE"),
        "handlers": {name: str(signal.getsignal(getattr(signal, name))) for name in ("SIGTERM", "SIGHUP", "SIGPIPE")},
        "sigint_raises": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
        "root_handlers": len(__import__("logging").getLogger().handlers),
    }
    print(json.dumps(seen), flush=True)
    if sys.argv[1:] == ["sleep"]:
        time.sleep(60)
    raise SystemExit(3)
