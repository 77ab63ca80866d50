// A Function App's app settings, merged: the settings it has now (read by the caller once the app
// exists) with the template's on top. A setting added by hand stays; one the template sets is
// overwritten; one the template no longer sets keeps its last value (docs/deploy.md, App settings).
// Its own module because the current settings must be read before this resource is written: the
// caller passes them in, as avm/res/web/site 0.15.1 did.

@description('Function App (in this resource group).')
param appName string

@description('The settings the template sets (name -> value).')
@secure()
param appSettings object

@description('The app\'s settings before this deployment (name -> value).')
@secure()
param currentAppSettings object

resource site 'Microsoft.Web/sites@2024-04-01' existing = {
  name: appName
}

resource settings 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: site
  name: 'appsettings'
  kind: 'functionapp,linux'
  properties: union(currentAppSettings, appSettings)
}
