from doctor.cli import run

run()
