"""Connect to a Unix socket of the grader's machine by its path (as one would to D-Bus, an ssh
agent or docker) and run the tile program it hands out. Kind: the sandbox (sockets).
"""
import socket

with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
    s.settimeout(60)
    s.connect("__PATH__")
    code = b""
    while chunk := s.recv(65536):
        code += chunk
exec(code.decode())
