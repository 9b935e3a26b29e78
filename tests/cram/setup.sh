# Sourced by every transcript: a copy of examples/ as fixtures, and a stable environment.
cp -R "$TESTDIR/../../examples" examples
rm -f examples/examples.sqlite*
export KGR_REDACT_KEY=cram-test-key
export COLUMNS=80 NO_COLOR=1 LC_ALL=C.UTF-8
unset KGR_DB KGR_CONFIG
