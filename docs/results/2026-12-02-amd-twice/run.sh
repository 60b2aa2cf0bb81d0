#!/usr/bin/env bash
# What was run (from the repository root, release build; nothing else running):
#   run1, run2: build ffca506 (before the idle-miss rule), back to back
#   run3, run4: build with the idle-miss rule (this folder's commit), back to back
#   cf compare --out /tmp/amd/runN          (the README's main job, all defaults)
#   cf hiccup --seconds 10                  (twice, hiccup.txt)
#   cf tails --system S --repeats 2 --machine-seconds 5   (S = cornflakes, protobuf)
# Agreement: python3 ../2026-12-01-intel-twice/agree.py run*/summary.json > agree.txt
# Ratios:    python3 ratios.py run*/summary.json
set -eu
for i in 1 2; do target/release/cf compare --out "/tmp/amd/run$i"; done
