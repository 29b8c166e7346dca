"""The host: what a process needs beyond the protocol (client requests and their replies,
retries, deadlines, blocking waits, leases, queue statistics, the member directory), as
one state machine the daemon and the simulators drive with typed inputs.  The client
protocol's requests, replies and results are its classes too (``requests``, ``replies``,
``results``), declared once; the wire derives their codec from them."""
