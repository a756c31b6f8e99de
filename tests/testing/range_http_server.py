"""A loopback HTTP server for the download script tests: serves DIR with Range support (as
curl -C - needs) and cuts the connection halfway through the first response for each file
named in CUT (comma-separated). Prints its port, then serves until killed.
usage: range_http_server.py DIR [CUT]"""
import http.server
import os
import sys

ROOT = sys.argv[1]
CUT = set(filter(None, (sys.argv[2] if len(sys.argv) > 2 else "").split(",")))


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        path = os.path.join(ROOT, self.path.lstrip("/").split("?")[0])
        if not os.path.isfile(path):
            self.send_error(404)
            return
        data = open(path, "rb").read()
        start = 0
        if self.headers.get("Range", "").startswith("bytes="):
            start = int(self.headers["Range"][6:].split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        name = os.path.basename(path)
        if name in CUT:
            CUT.discard(name)
            self.wfile.write(data[start:start + (len(data) - start) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(data[start:])

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
