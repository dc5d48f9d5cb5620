"""tools/bench's library: matrix, guest-output parsing, reports, argument and device checks."""
