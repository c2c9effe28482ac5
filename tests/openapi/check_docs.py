#!/usr/bin/env python3
"""`make test-docs`: the /docs page in a real headless browser.

Starts the server on the tiny BERT fixture (plain, then under --url-prefix)
and loads /docs#try=post_embed in Debian's chromium (--headless
--dump-dom, with a virtual-time budget so the page's fetches finish): the
page must have rendered every operation of /openapi.json and, through its
"try it" form, posted the example body to POST /embed and shown the 200
answer with its x-request-id. A screenshot of the page is kept as
build/artefacts/docs/docs.png (not committed). Standard library only.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyutil"))
from ivserver import ROOT, Server, default_binary, default_model  # noqa: E402


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    sys.exit("chromium not found: apt-get install chromium")


def browse(exe, url, out_dir, extra):
    base = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            f"--user-data-dir={os.path.join(out_dir, 'profile')}", "--virtual-time-budget=15000"]
    p = subprocess.run(base + extra + [url], capture_output=True, text=True, timeout=120)
    return p.stdout


def check(exe, server, prefix, out_dir, shot):
    fails = []
    with urllib.request.urlopen(server.url + prefix + "/openapi.json") as r:
        doc = json.load(r)
    n_ops = sum(len(v) for v in doc["paths"].values())
    url = server.url + prefix + "/docs#try=post_embed"
    dom = browse(exe, url, out_dir, ["--dump-dom"])
    with open(os.path.join(out_dir, f"docs{prefix.replace('/', '_')}.dom.html"), "w") as f:
        f.write(dom)
    m = re.search(r'data-operations="(\d+)"', dom)
    got = int(m.group(1)) if m else 0
    if got != n_ops:
        fails.append(f"rendered {got} operations, the document has {n_ops}")
    for path in doc["paths"]:
        if f'<span class="path">{path}</span>' not in dom:
            fails.append(f"route {path} not rendered")
    st = re.search(r'data-status="(\d+)"', dom)
    rid = re.search(r'class="request-id">([^<]*)<', dom)
    ans = re.search(r'<pre class="answer">([^<]*)</pre>', dom, re.S)
    if not st or st.group(1) != "200":
        fails.append(f"try-it POST /embed status: {st.group(1) if st else 'none'}")
    if not rid or not re.fullmatch(r"[0-9a-f]{32}", rid.group(1)):
        fails.append(f"try-it x-request-id: {rid.group(1) if rid else 'none'}")
    try:
        vecs = json.loads(ans.group(1)) if ans else None
        if not (isinstance(vecs, list) and len(vecs) >= 1 and isinstance(vecs[0][0], float)):
            fails.append("try-it answer is not a list of embeddings")
    except ValueError:
        fails.append("try-it answer is not JSON")
    for key in ("EmbedRequest", "inputs", "required"):  # the request schema was rendered
        if key not in dom:
            fails.append(f"schema text {key!r} missing")
    if shot:
        png = os.path.join(out_dir, "docs.png")
        browse(exe, url, out_dir, [f"--screenshot={png}", "--window-size=1280,2000", "--hide-scrollbars"])
        if not os.path.exists(png) or os.path.getsize(png) < 10000:
            fails.append("no screenshot")
        else:
            print(f"screenshot: {os.path.relpath(png, ROOT)} ({os.path.getsize(png)} bytes)")
    print(f"/docs{' under ' + prefix if prefix else ''}: {got}/{n_ops} operations rendered, "
          f"try-it POST {prefix}/embed -> {st.group(1) if st else '-'} "
          f"x-request-id {rid.group(1) if rid else '-'}: {'OK' if not fails else 'FAIL'}")
    for f in fails:
        print("  " + f)
    return len(fails)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=default_binary())
    ap.add_argument("--model-id", default=default_model())
    ap.add_argument("--out", default=os.path.join(ROOT, "build/artefacts/docs"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    exe = chromium()
    fails = 0
    for prefix in ("", "/api/v1"):
        extra = ["--url-prefix", prefix] if prefix else []
        s = Server(a.binary, a.model_id, extra=extra, log_dir=a.out).start()
        try:
            fails += check(exe, s, prefix, a.out, shot=not prefix)
        finally:
            fails += s.stop() != 0
    print("test-docs:", "PASS" if not fails else f"FAIL ({fails})")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
