"""The project's ``scrapy`` commands (``COMMANDS_MODULE``): a command here
replaces Scrapy's command of the same name."""
