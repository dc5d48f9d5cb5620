# Not a test of the driver: a guest that falls silent, for tools/test's check that tools/vm
# ends a hung guest (--silence) and its verdict fails the run. The heartbeat stops, then the
# guest waits for longer than any run lasts.
kill $NVA_HEARTBEAT
sleep 86400
