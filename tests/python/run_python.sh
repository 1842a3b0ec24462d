#!/bin/sh
# run_python.sh PYTHON SCRIPT [ARGS...]: runs a test script with PYTHON, or skips (77) when that
# interpreter is not installed.
py=$1
shift
if [ ! -x "$py" ]; then
    echo "SKIP: $py is not installed"
    exit 77
fi
exec "$py" "$@"
