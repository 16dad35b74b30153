# Sphinx configuration of the zaqar-delay release notes (reno).
project = 'zaqar-delay release notes'
extensions = ['reno.sphinxext']
master_doc = 'index'
