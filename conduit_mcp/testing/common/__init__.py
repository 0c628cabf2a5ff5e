"""What both test servers share: the subprocess handle, TLS, split bodies, the event log."""
