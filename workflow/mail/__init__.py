"""Mail: messages as bytes and headers, threads, templates, Maildirs and the index over them."""
