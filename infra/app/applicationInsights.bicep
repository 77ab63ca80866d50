// Application Insights, workspace-based: the app's telemetry. Local (instrumentation key)
// authentication is disabled, so telemetry is accepted only with an Entra ID token: the app's
// identity holds Monitoring Metrics Publisher on it (monitoringAccess.bicep) and the host signs in
// as APPLICATIONINSIGHTS_AUTHENTICATION_STRING says.
// Plain resource, no registry module: the properties avm/res/insights/component 0.6.0 sent with the
// parameters main.bicep gave it, its defaults included (kind '', 365 days, no sampling, IP masking off).

@description('Component name.')
param name string

@description('Region of the component.')
param location string

@description('Tags of the component.')
param tags object = {}

@description('Resource id of the Log Analytics workspace that stores the telemetry.')
param workspaceResourceId string

resource component 'Microsoft.Insights/components@2020-02-02' = {
  name: name
  location: location
  tags: tags
  kind: ''
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspaceResourceId
    DisableLocalAuth: true
    DisableIpMasking: true
    ForceCustomerStorageForProfiler: false
    publicNetworkAccessForIngestion: 'Enabled'
    publicNetworkAccessForQuery: 'Enabled'
    RetentionInDays: 365
    SamplingPercentage: 100
  }
}

@description('Component name, for the role assignment, the workbook and the alert rules.')
output name string = component.name

@description('Where telemetry goes; not a credential, since local authentication is off.')
output connectionString string = component.properties.ConnectionString
