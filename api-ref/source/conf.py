# Sphinx configuration of the zaqar-delay API reference (os-api-ref).
project = 'zaqar-delay API reference'
extensions = ['os_api_ref']
html_theme = 'alabaster'
master_doc = 'index'
