"""The settings window: model providers, tools and approvals, general preferences.

Pages edit plain copies of the settings. Saving snapshots what changed into a patch (plain
data, built on the GUI thread), stores API keys in the keyring and applies the patch through
`SettingsStore.update` — both in a worker thread — then replaces `runtime.settings`.
Only what the user changed is written, so rules the chat added meanwhile survive. Save is
enabled only while a page has changes; closing with unsaved changes asks first.

API keys never reach settings.json: they go to the keyring under
`provider/<account id>/api_key` when the user clicks Save.

Modules: `dialog` (the window, saving, the unsaved-changes question), `page` (what every
page shares), `form` (forms generated from the pydantic settings model, and `FormPage`),
`general_page` (General, Instructions, Browser and Security: model pages only),
`terminal_page` and `memory_page` (a model form plus their own parts), `about_page`,
`providers_page`, `account_list` and `connection` (the providers page, its list and its
server checks), `tools_page` and `choice_column` (its painted Approval column), `presets`
(known servers, URL checks) and `widgets` (small shared widgets and helpers).
"""
