#!/usr/bin/env python3
"""Counts gtest cases from Bazel build-event JSON files and prints "N passed, N failed, N skipped".

The test.xml files are taken from the build events of this run (not by globbing bazel-testlogs, which keeps
stale results). A test target that failed without any failing case in its XML (a crash, a timeout, a build
error) counts as one failure. Exits 1 when anything failed or nothing ran.
"""
import json
import sys
import xml.etree.ElementTree as ET
from urllib.parse import unquote, urlparse


def read_events(path, xmls, bad_targets):
    """Collects one build's test.xml files and failed targets; returns how many targets failed to build."""
    build_failures = 0
    with open(path) as f:
        for line in f:
            event = json.loads(line)
            eid = event.get("id", {})
            if "testResult" in eid:
                label = path + ":" + eid["testResult"]["label"]  # the same label may come from two workspaces
                result = event.get("testResult", {})
                if result.get("status") != "PASSED":
                    bad_targets.add(label)
                for out in result.get("testActionOutput", []):
                    if out.get("name") == "test.xml":
                        xmls.setdefault(label, []).append(unquote(urlparse(out["uri"]).path))
            elif "targetCompleted" in eid and not event.get("completed", {}).get("success", True):
                build_failures += 1
    return build_failures


def main(paths):
    xmls, bad_targets = {}, set()
    build_failures = sum(read_events(p, xmls, bad_targets) for p in paths)
    passed = failed = skipped = 0
    failed_in_xml = set()
    for label, files in xmls.items():
        for x in files:
            try:
                root = ET.parse(x).getroot()
            except (ET.ParseError, OSError):
                continue
            for case in root.iter("testcase"):
                if case.find("failure") is not None or case.find("error") is not None:
                    failed += 1
                    failed_in_xml.add(label)
                elif case.find("skipped") is not None or case.get("result") == "skipped" or case.get("status") == "notrun":
                    skipped += 1
                else:
                    passed += 1
    failed += len(bad_targets - failed_in_xml) + build_failures
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
