"""Who may do what: the cluster secret, the cluster CA, member proofs and application users.

``pki``, ``member`` and ``users`` are pure (bytes and values in, values out; the time is passed
in); ``files`` is the one module here that touches the file system (private files, mode 0600).
"""
