"""TVMScript text (parser and printer) and the JSON module format."""
