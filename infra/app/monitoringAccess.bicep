// Lets the app's managed identity send telemetry to an Application Insights resource that has
// local (instrumentation key) authentication disabled: the host authenticates with Entra ID as
// APPLICATIONINSIGHTS_AUTHENTICATION_STRING says, and ingestion requires this role.

@description('Application Insights component (in this resource group).')
param applicationInsightsName string

@description('Principal (object) id of the user-assigned managed identity.')
param principalId string

// Built-in role, from https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/monitor
var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb'

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource assignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(applicationInsights.id, principalId, monitoringMetricsPublisher)
  scope: applicationInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}
