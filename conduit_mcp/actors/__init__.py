"""The client's actors: the connection (with its handshake and HTTP-outcome states), the
listen-stream, the notifier and the refresher. They run on the generic runtime in
:mod:`conduit_mcp.otp`; see ``docs/architecture.md`` for the tree and its messages."""
