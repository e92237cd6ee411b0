"""The survey: signed rating links, the survey web server, and the simulated panel's counterpart."""
