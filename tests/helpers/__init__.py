"""Test helpers: real projects, real servers, fakes at the wire — shared by every test folder."""
