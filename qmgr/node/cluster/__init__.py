"""The cluster side of a running node: repository link, channels, proxies and routing."""
