; Inno Setup script: a per-user Deskhand installer (no admin rights needed).
; Not run on the Linux build machine; the release workflow builds it on windows-latest:
;
;   pyinstaller packaging\deskhand.spec --noconfirm --distpath build\dist --workpath build\pyinstaller
;   iscc /DAppVersion=0.1.0 packaging\windows\deskhand.iss
;
; -> dist\deskhand-<version>-windows-x64-setup.exe
; Paths below are relative to this file (packaging\windows\).

#ifndef AppVersion
  #define AppVersion "0.0.0"
#endif

[Setup]
; Keep AppId fixed across releases: upgrades and the uninstaller find the install by it.
AppId={{6B0E9D3A-4C1F-4B8E-9C61-2D7E5B1A9F30}
AppName=Deskhand
AppVersion={#AppVersion}
AppPublisher=Deskhand developers
; Per user: installs under %LOCALAPPDATA%\Programs\Deskhand, Start menu of this user only.
PrivilegesRequired=lowest
DefaultDirName={autopf}\Deskhand
DefaultGroupName=Deskhand
DisableProgramGroupPage=yes
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir=..\..\dist
OutputBaseFilename=deskhand-{#AppVersion}-windows-x64-setup
SetupIconFile=..\..\resources\icons\deskhand.ico
UninstallDisplayIcon={app}\deskhand.exe
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern
; Close a running Deskhand (it stays in the tray) before files are replaced or removed.
CloseApplications=yes

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[Files]
; The PyInstaller onedir bundle: deskhand.exe (window), deskhand-cli.exe (terminal), _internal\.
Source: "..\..\build\dist\deskhand\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{group}\Deskhand"; Filename: "{app}\deskhand.exe"
Name: "{group}\Uninstall Deskhand"; Filename: "{uninstallexe}"
Name: "{autodesktop}\Deskhand"; Filename: "{app}\deskhand.exe"; Tasks: desktopicon

[Run]
Filename: "{app}\deskhand.exe"; Description: "{cm:LaunchProgram,Deskhand}"; Flags: nowait postinstall skipifsilent

[UninstallRun]
; Ask a running instance to quit is not possible headless; end it so its files can go.
Filename: "{sys}\taskkill.exe"; Parameters: "/F /IM deskhand.exe"; Flags: runhidden; RunOnceId: "StopDeskhand"

[UninstallDelete]
; Only the install folder: the user's settings, history and keyring entries stay
; (%LOCALAPPDATA%\deskhand), like any app's data on Windows.
Type: filesandordirs; Name: "{app}"
