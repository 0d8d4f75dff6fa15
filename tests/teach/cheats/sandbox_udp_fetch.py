"""Fetch the tile program over UDP from a server on this machine and run it (Landlock covers
TCP only). Kind: the sandbox (network).
"""
import socket

with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    s.settimeout(60)
    s.connect(("127.0.0.1", __PORT__))
    s.send(b"matmul")
    code = s.recv(65536)
exec(code.decode())
