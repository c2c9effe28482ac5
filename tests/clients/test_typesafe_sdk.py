#!/usr/bin/env python3
"""The official TypeSafe Python SDK (PyPI typesafe-sdk 0.7.5, the client of
the System One API) against the real infinity_v3 binary serving the
laya_tiny decision fixture: system_one() with Noul, Choice and Score
questions parses our strict reply, and its answers equal the fixture's
reference probabilities; models.list() reads GET /v1/models; a 422 becomes
TypeSafeUnprocessableEntityError and a wrong key TypeSafeAuthenticationError.

    python3 -m venv --system-site-packages .cache/dvenv
    .cache/dvenv/bin/pip install typesafe-sdk==0.7.5
    .cache/dvenv/bin/python tests/clients/test_typesafe_sdk.py --binary build/release/infinity_v3

The SDK compresses bodies with zstd by default; infinity_v3 does not accept
Content-Encoding on requests, so the client is made with compression=False.
Prints one line per check; exit 0 when every check passed.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyutil"))
from ivserver import ROOT, Server, default_binary  # noqa: E402

import typesafe_sdk  # noqa: E402
from typesafe_sdk import Choice, Noul, RetryPolicy, Score, TypeSafeClient  # noqa: E402

KEY = "decision-key"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=default_binary())
    a = ap.parse_args()
    fixture = os.path.join(ROOT, "tests", "fixtures", "models", "laya_tiny")
    expected = json.load(open(os.path.join(fixture, "expected.json")))
    srv = Server(a.binary, fixture, extra=["--served-model-name", "laya-tiny", "--api-key", KEY]).start()
    failures = 0
    try:
        base = "http://127.0.0.1:%d" % srv.port
        client = TypeSafeClient(api_key=KEY, base_url=base, model="laya-tiny", compression=False,
                                retry=RetryPolicy(max_retries=0))
        case = expected["cases"][0]
        qs = case["request"]["questions"]
        res = client.system_one(
            state=case["request"]["state"],
            questions={"q_noul": Noul(instructions=qs["q_noul"]["instructions"]),
                       "q_choice": Choice(instructions=qs["q_choice"]["instructions"], criteria=qs["q_choice"]["criteria"]),
                       "q_score": Score(instructions=qs["q_score"]["instructions"], criteria=qs["q_score"]["criteria"])})
        want = case["answers"]
        err = max(abs(res.nouls["q_noul"].noul - want["q_noul"]["probabilities"][1]),
                  max(abs(res.choices["q_choice"].probabilities[k] - p)
                      for k, p in zip(["mat", "roof", "garden"], want["q_choice"]["probabilities"])),
                  max(abs(res.scores["q_score"].probabilities[i] - p)
                      for i, p in enumerate(want["q_score"]["probabilities"])))
        ok = err <= 1e-4 and res.model == "laya-tiny" and res.usage.output_tokens == 0
        print("typesafe-sdk %s system_one: noul/choice/score parsed, max |p - reference| %.3g: %s"
              % (typesafe_sdk.__version__, err, "OK" if ok else "FAIL"))
        failures += not ok
        models = client.models.list()
        names = [m.name for m in models.models]
        ok = names == ["laya-tiny"]
        print("typesafe-sdk models.list: %s: %s" % (names, "OK" if ok else "FAIL"))
        failures += not ok
        try:
            # A field the contract does not know: the server answers 422 (strict mode).
            client.system_one(state="x", questions={"a": Noul(instructions="x")}, extra_body={"bogus": 1})
            print("typesafe-sdk 422: no error raised: FAIL")
            failures += 1
        except (typesafe_sdk.TypeSafeUnprocessableEntityError, typesafe_sdk.TypeSafeBadRequestError,
                typesafe_sdk.TypeSafeError) as e:
            ok = isinstance(e, typesafe_sdk.TypeSafeUnprocessableEntityError)
            print("typesafe-sdk invalid request -> %s (%s): %s" % (type(e).__name__, str(e)[:120], "OK" if ok else "FAIL"))
            failures += not ok
        try:
            TypeSafeClient(api_key="wrong", base_url=base, model="laya-tiny", compression=False,
                           retry=RetryPolicy(max_retries=0)).system_one(state="x", questions={"a": Noul(instructions="x")})
            print("typesafe-sdk wrong key: no error raised: FAIL")
            failures += 1
        except typesafe_sdk.TypeSafeError as e:
            ok = isinstance(e, typesafe_sdk.TypeSafeAuthenticationError)
            print("typesafe-sdk wrong key -> %s: %s" % (type(e).__name__, "OK" if ok else "FAIL"))
            failures += not ok
    finally:
        srv.stop()
    print("test-typesafe-sdk: %s" % ("PASS" if not failures else "FAIL (%d)" % failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
