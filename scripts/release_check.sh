#!/usr/bin/env bash
# The release, checked as an admin meets it: build the sdist and the wheel, then from an empty
# directory install the wheel in a fresh venv and run `gpufair --version`, the main job
# (`gpufair simulate`) and `gpufair admin write-files`; unpack the sdist, install it in another
# venv and run its test suite there (the installed package, not the source tree).
# Usage:  scripts/release_check.sh [--quick]
#   --quick  the sdist's unit tests only (no integration tests, no slow ones): ~3 min less
# Env:    PYTHON (default python3)   KEEP=1 keeps the work directory (printed at the end)
# Needs the package index (build, twine, the dependencies); installs with ci/constraints.txt.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
QUICK=0
for a in "$@"; do
  case $a in --quick) QUICK=1;; *) echo "unknown arg $a" >&2; exit 2;; esac
done
WORK=$(mktemp -d /tmp/gpufair-release.XXXXXX)
[[ ${KEEP:-0} == 1 ]] || trap 'rm -rf "$WORK"' EXIT
step() { echo "== $*"; }

step "build sdist and wheel ($("$PY" --version))"
"$PY" -m venv "$WORK/tools"
"$WORK/tools/bin/python" -m pip install --quiet build twine
"$WORK/tools/bin/python" -m build --outdir "$WORK/dist" "$REPO" >"$WORK/build.log" 2>&1 \
  || { tail -30 "$WORK/build.log" >&2; exit 1; }
wheel=$(ls "$WORK"/dist/*.whl)
sdist=$(ls "$WORK"/dist/*.tar.gz)
ls -l "$WORK/dist"
case $(basename "$wheel") in
  *-py3-none-any.whl) echo "wheel tag: py3-none-any" ;;
  *) echo "the wheel is platform-specific ($(basename "$wheel")): an index refuses it" >&2
     exit 1 ;;
esac
"$WORK/tools/bin/twine" check --strict "$WORK"/dist/*

step "the wheel, from an empty directory"
mkdir "$WORK/empty"
cd "$WORK/empty"
"$PY" -m venv "$WORK/wheel-env"
"$WORK/wheel-env/bin/python" -m pip install --quiet -c "$REPO/ci/constraints.txt" "$wheel"
"$WORK/wheel-env/bin/gpufair" --version
"$WORK/wheel-env/bin/python" -m gpufair --version
"$WORK/wheel-env/bin/gpufair" simulate | tee "$WORK/simulate.txt"
"$WORK/wheel-env/bin/gpufair" admin write-files --root "$WORK/admin-root" --user "$(id -un)"
"$WORK/wheel-env/bin/gpufair" config "$WORK/admin-root/etc/gpufair/gpufair.toml"
[[ -z $(ls -A "$WORK/empty") ]] || { echo "the commands left files in the cwd" >&2; exit 1; }

step "the sdist's tests, against the sdist installed"
tar xzf "$sdist" -C "$WORK"
src=$(ls -d "$WORK"/gpufair-*/)
"$PY" -m venv "$WORK/sdist-env"
"$WORK/sdist-env/bin/python" -m pip install --quiet -c "$src/ci/constraints.txt" \
  "gpufair[test] @ file://$sdist"
cd "$src"
args=(-q -p no:cacheprovider)
(( QUICK )) && args+=(--ignore=tests/integration -m "not slow")
# the pytest script, not `python -m pytest`: that would put the unpacked source tree first on
# sys.path and test it instead of what pip installed. The tests import each other as
# `tests.x`: a directory holding only a link to tests/ gives them that, and no gpufair.
mkdir "$WORK/tests-path"
ln -s "$src/tests" "$WORK/tests-path/tests"
PYTHONPATH="$WORK/tests-path" "$WORK/sdist-env/bin/pytest" "${args[@]}"
[[ ${KEEP:-0} == 1 ]] && echo "kept: $WORK"
true
echo "release check passed"
