"""Who may do what: the cluster secret and the member secret derived from it, the cluster CA,
member proofs and application users.

``keys``, ``pki``, ``member`` and ``users`` are pure (bytes and values in, values out; the time is passed
in); ``files`` is the one module here that touches the file system (private files, mode 0600).
"""
