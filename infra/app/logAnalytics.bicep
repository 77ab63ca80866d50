// The Log Analytics workspace behind Application Insights: where the app's logs and telemetry are
// kept and queried (the workbook and the alert rules read them through Application Insights).
// Plain resource, no registry module: the properties avm/res/operational-insights/workspace 0.11.1
// sent with the parameters main.bicep gave it, its defaults included (local authentication off,
// pay-as-you-go SKU, no daily cap).

@description('Workspace name.')
param name string

@description('Region of the workspace.')
param location string

@description('Tags of the workspace.')
param tags object = {}

@description('Days the workspace keeps data.')
@minValue(30)
@maxValue(730)
param retentionInDays int = 30

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionInDays
    workspaceCapping: {
      dailyQuotaGb: -1
    }
    features: {
      searchVersion: 1
      enableLogAccessUsingOnlyResourcePermissions: false
      disableLocalAuth: true
    }
    publicNetworkAccessForIngestion: 'Enabled'
    publicNetworkAccessForQuery: 'Enabled'
    forceCmkForQuery: true
  }
}

@description('Resource id of the workspace, for Application Insights.')
output resourceId string = workspace.id
